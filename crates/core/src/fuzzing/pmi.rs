//! PMI-1, client side: the replies a launcher sends.

/// Fuzz target `pmi_client`: `data` is everything a (hostile) PMI-1
/// launcher sends to a starting process; the client runs its whole
/// session against it (handshake, put, barrier, get, finalize) and must
/// end with a result or a clear error. Bounds: the first 64 KiB of `data`
/// are used; the client's buffer holds at most one line
/// ([`crate::bootstrap::pmi_wire::MAX_LINE`]) plus one read; each wait is
/// cut to 100 ms.
pub fn pmi_client(data: &[u8]) {
    crate::bootstrap::pmi::fuzz_replies(data);
    // The codec alone too, on every line of the input.
    let mut lb = crate::bootstrap::pmi_wire::LineBuffer::new();
    lb.push(&data[..data.len().min(crate::bootstrap::pmi::FUZZ_MAX_INPUT)]);
    while let Some(r) = lb.next_command() {
        if let Ok(c) = r {
            let _ = c.encode();
            let _ = c.rc();
        }
    }
}
