//! PMI-2, client side: the replies a launcher sends.

/// Fuzz target `pmi2_client`: `data` is everything a (hostile) PMI-2
/// launcher sends to a starting process (the `response_to_init` line, then
/// length-prefixed frames); the client runs its whole session against it
/// (handshake, put, fence, get, job attribute, finalize) and must end with
/// a result or a clear error. A first byte 0x01 selects the `PMI_ID`
/// start-up. Bounds: the first 64 KiB of `data` are used; the client
/// buffers at most one frame
/// ([`crate::bootstrap::pmi2_wire::MAX_BODY`] + 6 bytes) plus one read;
/// each wait is cut to 100 ms.
pub fn pmi2_client(data: &[u8]) {
    crate::bootstrap::pmi2::fuzz_replies(data);
    // The codec alone too, on the whole input.
    use crate::bootstrap::pmi2_wire::{encode, Frames};
    let mut frames = Frames::new();
    frames.push(&data[..data.len().min(crate::bootstrap::pmi2::FUZZ_MAX_INPUT)]);
    let _ = frames.next_init_line();
    // A bad frame leaves the stream unusable: stop at the first error.
    while let Some(Ok(c)) = frames.next_frame() {
        let _ = encode(&c);
        let _ = c.rc();
    }
}
