//! tcp framing after authentication.

/// Feeds `data` to the frame parser of an authenticated tcp connection.
///
/// Input layout: `data[0]` selects the largest accepted message
/// (`GW_TCP_MAX_MSG`, 16 B to 8 MiB), `data[1]` the size of each read
/// (1 B to 8 MiB, 0 = as much as the connection offers), the rest is the
/// peer's byte stream. Never panics; the receive buffer stays below twice
/// the stream's length plus 128 KiB, whatever the headers announce.
pub fn tcp_frames(data: &[u8]) {
    crate::method::tcp::fuzz_stream(data);
}
