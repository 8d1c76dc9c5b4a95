//! Fuzz targets of the launcher (see the project's fuzzing rule: never
//! panic, hang or allocate beyond a stated bound).

use gridwire_core::bootstrap::pmi_wire::{parse_line, LineBuffer, MAX_LINE};

use crate::server::Server;

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
