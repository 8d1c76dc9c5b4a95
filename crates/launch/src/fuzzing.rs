//! Fuzz targets of the launcher (see the project's fuzzing rule: never
//! panic, hang or allocate beyond a stated bound).

use gridwire_core::bootstrap::pmi2_wire::{parse_body, parse_length, LEN_FIELD, MAX_BODY};
use gridwire_core::bootstrap::pmi_wire::{parse_line, LineBuffer, MAX_LINE};

use crate::server::{PmiStream, Server};

/// Ranks of the job the fuzzed server serves.
const RANKS: usize = 4;

/// Fuzz target `pmi_server`: `data` is what the ranks of a 4-rank job send
/// to gwrun's PMI-1 server, split among them line by line (line k comes
/// from rank k mod 4) and delivered in pieces of 1 to 16 bytes. Every
/// reply the server makes must be one well-formed PMI line. Bounds: the
/// line buffer holds at most `MAX_LINE` plus one piece; the key-value space
/// is bounded by the server's stated KVS limits.
pub fn pmi_server(data: &[u8]) {
    let mut server = Server::new(RANKS, "kvs_fuzz".into(), "(vector,(0,4,1))".into());
    let mut lb = LineBuffer::new();
    let mut line_no = 0usize;
    let mut i = 0;
    while i < data.len() {
        let piece = 1 + (data[i] as usize % 16);
        let end = (i + piece).min(data.len());
        lb.push(&data[i..end]);
        i = end;
        assert!(
            lb.pending() <= MAX_LINE + 16,
            "line buffer grew past its bound"
        );
        while let Some(cmd) = lb.next_command() {
            let out = server.handle(line_no % RANKS, cmd);
            line_no += 1;
            for (to, line) in &out.replies {
                assert!(*to < RANKS, "reply to a rank that does not exist");
                assert!(
                    line.ends_with('\n') && line.matches('\n').count() == 1,
                    "reply is not one line: {line:?}"
                );
                assert!(parse_line(line.as_bytes()).is_ok(), "bad reply {line:?}");
            }
        }
    }
}

/// Fuzz target `pmi2_server`: what the ranks of a 4-rank job send to
/// gwrun's server over connections whose protocol (PMI-1 or PMI-2) the
/// server detects from their first bytes. `data` is a list of records
/// `[rank][n][n bytes]`: the bytes go to rank `rank mod 4`'s connection
/// (a record cut short sends what there is). Every reply must be one
/// PMI-1 line or one well-formed PMI-2 frame; a connection the server
/// closes takes no more bytes. Bounds: each stream holds at most one frame
/// or line plus one push of at most 255 bytes.
pub fn pmi2_server(data: &[u8]) {
    let mut server = Server::new(RANKS, "kvs_fuzz".into(), "(vector,(0,4,1))".into());
    let mut streams: Vec<PmiStream> = (0..RANKS).map(|_| PmiStream::new()).collect();
    let mut closed = [false; RANKS];
    let mut i = 0;
    while i + 1 < data.len() {
        let rank = data[i] as usize % RANKS;
        let n = data[i + 1] as usize;
        let end = (i + 2 + n).min(data.len());
        let piece = &data[i + 2..end];
        i = end;
        if closed[rank] {
            continue;
        }
        streams[rank].push(piece);
        assert!(
            streams[rank].pending() <= MAX_LINE + 2 * 256 + LEN_FIELD,
            "a PMI stream grew past its bound"
        );
        while let Some(req) = streams[rank].next_request() {
            let out = server.handle_request(rank, req);
            for (to, reply) in &out.replies {
                assert!(*to < RANKS, "reply to a rank that does not exist");
                check_reply(reply);
            }
            if out
                .notices
                .iter()
                .any(|n| matches!(n, crate::server::Notice::Close { .. }))
            {
                closed[rank] = true;
                break;
            }
        }
    }
}

/// One PMI-1 line, or one PMI-2 frame whose length field is right.
fn check_reply(reply: &str) {
    let b = reply.as_bytes();
    if reply.starts_with("cmd=") {
        assert!(
            reply.ends_with('\n') && reply.matches('\n').count() == 1,
            "reply is not one line: {reply:?}"
        );
        assert!(parse_line(b).is_ok(), "bad reply {reply:?}");
        return;
    }
    assert!(b.len() > LEN_FIELD, "short reply {reply:?}");
    let n = parse_length(&b[..LEN_FIELD]).expect("reply length field");
    assert!(n <= MAX_BODY);
    assert_eq!(n + LEN_FIELD, b.len(), "reply is not one frame: {reply:?}");
    assert!(parse_body(&b[LEN_FIELD..]).is_ok(), "bad reply {reply:?}");
}
