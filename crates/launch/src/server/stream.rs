//! One rank's PMI connection as a stream of requests: which protocol it
//! speaks is told by its first bytes, then the matching reassembler takes
//! over.
//!
//! - A PMI-2 client (MPICH's library, the runtime's `GW_PMI=pmi2`) first
//!   writes the PMI-1 *line* `cmd=init pmi_version=2 pmi_subversion=0`;
//!   after its reply both sides speak length-prefixed PMI-2 frames
//!   (`core::bootstrap::pmi2_wire`). Hydra's proxy decides the same way.
//! - A client may also start with a frame directly (a 6-byte length,
//!   digits padded with spaces, e.g. `fullinit`), as Hydra accepts.
//! - Anything else is PMI-1 lines, the first included.
//!
//! Bounds: before the decision at most [`MAX_INIT_LINE`] bytes plus one
//! push are held (a longer first line can only be PMI-1, whose own line
//! limit applies); after it, the line buffer's or the frame buffer's bound.
//! A PMI-2 length field that cannot be read leaves no way to find the next
//! frame: the stream then reports that one error and ignores the rest (the
//! server closes the connection on it).

use gridwire_core::bootstrap::pmi2_wire::{Frames, Wire2Error, LEN_FIELD, MAX_INIT_LINE};
use gridwire_core::bootstrap::pmi_wire::{parse_line, Command, LineBuffer, WireError};

/// One request from a rank, in the protocol its connection speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A PMI-1 line (or why it is not one).
    V1(Result<Command, WireError>),
    /// The PMI-1 style `cmd=init pmi_version=2` line that starts PMI-2.
    V2Init(Command),
    /// A PMI-2 frame (or why it is not one).
    V2(Result<Command, Wire2Error>),
}

#[derive(Debug)]
enum State {
    /// Nothing decided yet: the first bytes.
    Detecting(Vec<u8>),
    V1(LineBuffer),
    V2(Frames),
    /// A PMI-2 framing error: nothing more can be read from this stream.
    Broken,
}

/// Reassembles one rank's PMI requests from the bytes read off its socket.
#[derive(Debug)]
pub struct PmiStream {
    state: State,
}

impl Default for PmiStream {
    fn default() -> Self {
        PmiStream {
            state: State::Detecting(Vec::new()),
        }
    }
}

impl PmiStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends raw bytes read from the rank's PMI socket.
    pub fn push(&mut self, data: &[u8]) {
        match &mut self.state {
            State::Detecting(head) => head.extend_from_slice(data),
            State::V1(lb) => lb.push(data),
            State::V2(fr) => fr.push(data),
            State::Broken => {}
        }
    }

    /// Bytes buffered but not yet returned as a request.
    pub fn pending(&self) -> usize {
        match &self.state {
            State::Detecting(head) => head.len(),
            State::V1(lb) => lb.pending(),
            State::V2(fr) => fr.pending(),
            State::Broken => 0,
        }
    }

    /// True once the stream speaks PMI-2.
    pub fn is_pmi2(&self) -> bool {
        matches!(self.state, State::V2(_))
    }

    /// The next complete request, `None` if more bytes are needed.
    pub fn next_request(&mut self) -> Option<Request> {
        if let State::Detecting(head) = &mut self.state {
            match detect(head) {
                Decision::Wait => return None,
                Decision::V1 => {
                    let mut lb = LineBuffer::new();
                    lb.push(head);
                    self.state = State::V1(lb);
                }
                Decision::Frames => {
                    let mut fr = Frames::new();
                    fr.push(head);
                    self.state = State::V2(fr);
                }
                Decision::InitLine(cmd, rest) => {
                    let mut fr = Frames::new();
                    fr.push(&head[rest..]);
                    self.state = State::V2(fr);
                    return Some(Request::V2Init(cmd));
                }
            }
        }
        match &mut self.state {
            State::Detecting(_) | State::Broken => None,
            State::V1(lb) => lb.next_command().map(Request::V1),
            State::V2(fr) => {
                let r = fr.next_frame()?;
                if matches!(
                    r,
                    Err(Wire2Error::BadLength(_) | Wire2Error::LengthOutOfRange(_))
                ) {
                    self.state = State::Broken;
                }
                Some(Request::V2(r))
            }
        }
    }
}

enum Decision {
    Wait,
    V1,
    Frames,
    /// The PMI-2 init line, and where the bytes after it start.
    InitLine(Command, usize),
}

fn detect(head: &[u8]) -> Decision {
    let Some(first) = head.iter().position(|&b| b != b' ') else {
        // Only spaces: a frame's length field once six are there would
        // still need a digit in them, so it is not one.
        return if head.len() >= LEN_FIELD {
            Decision::V1
        } else {
            Decision::Wait
        };
    };
    if first < LEN_FIELD && head[first].is_ascii_digit() {
        return Decision::Frames;
    }
    let window = &head[..head.len().min(MAX_INIT_LINE)];
    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
        return if head.len() >= MAX_INIT_LINE {
            Decision::V1
        } else {
            Decision::Wait
        };
    };
    match parse_line(&head[..nl]) {
        Ok(cmd) if cmd.name == "init" && cmd.get("pmi_version") == Some("2") => {
            Decision::InitLine(cmd, nl + 1)
        }
        _ => Decision::V1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gridwire_core::bootstrap::pmi2_wire::{encode, MAX_BODY};

    fn all(s: &mut PmiStream) -> Vec<Request> {
        std::iter::from_fn(|| s.next_request()).collect()
    }

    #[test]
    fn pmi1_lines_stay_pmi1() {
        let mut s = PmiStream::new();
        s.push(b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\n");
        let r = all(&mut s);
        assert_eq!(r.len(), 2);
        assert!(matches!(&r[0], Request::V1(Ok(c)) if c.name == "init"));
        assert!(matches!(&r[1], Request::V1(Ok(c)) if c.name == "get_maxes"));
        assert!(!s.is_pmi2());
    }

    /// The init line asking for version 2 switches to frames, also when
    /// the first frame arrives in the same read, and byte by byte.
    #[test]
    fn init_line_then_frames_in_any_pieces() {
        let mut data = b"cmd=init pmi_version=2 pmi_subversion=0\n".to_vec();
        data.extend(encode(&Command::new("fullinit").arg("pmirank", 1)).unwrap());
        data.extend(encode(&Command::new("kvs-fence")).unwrap());
        for piece in [1, 3, 7, data.len()] {
            let mut s = PmiStream::new();
            let mut got = Vec::new();
            for c in data.chunks(piece) {
                s.push(c);
                got.extend(all(&mut s));
            }
            assert_eq!(got.len(), 3, "pieces of {piece}: {got:?}");
            assert!(matches!(&got[0], Request::V2Init(c) if c.name == "init"));
            assert!(matches!(&got[1], Request::V2(Ok(c)) if c.get("pmirank") == Some("1")));
            assert!(matches!(&got[2], Request::V2(Ok(c)) if c.name == "kvs-fence"));
            assert!(s.is_pmi2());
            assert_eq!(s.pending(), 0);
        }
    }

    /// A client that starts with a frame (Hydra's right-aligned length
    /// too) is PMI-2 from the first byte.
    #[test]
    fn a_frame_first_is_pmi2() {
        for first in [&b"    13cmd=fullinit;"[..], b"13    cmd=fullinit;"] {
            let mut s = PmiStream::new();
            s.push(first);
            assert!(matches!(s.next_request(), Some(Request::V2(Ok(c))) if c.name == "fullinit"));
        }
    }

    /// A bad length field is reported once; the rest is ignored, so a
    /// caller's loop ends.
    #[test]
    fn bad_length_breaks_the_stream_once() {
        let mut s = PmiStream::new();
        s.push(b"cmd=init pmi_version=2\n999999xxxxxxxxxxxxx");
        assert!(matches!(s.next_request(), Some(Request::V2Init(_))));
        assert!(matches!(
            s.next_request(),
            Some(Request::V2(Err(Wire2Error::LengthOutOfRange(999_999))))
        ));
        assert!(s.next_request().is_none());
        s.push(b"20    cmd=kvs-fence;");
        assert!(s.next_request().is_none());
        assert_eq!(s.pending(), 0);
        // A garbled body keeps the framing: the next frame is read.
        let mut s = PmiStream::new();
        s.push(b"5     junk;14    cmd=kvs-fence;");
        assert!(matches!(s.next_request(), Some(Request::V2(Err(_)))));
        assert!(matches!(s.next_request(), Some(Request::V2(Ok(c))) if c.name == "kvs-fence"));
    }

    /// Whatever the first bytes, detection holds a bounded amount.
    #[test]
    fn detection_is_bounded() {
        let mut s = PmiStream::new();
        s.push(&vec![b'a'; MAX_INIT_LINE - 1]);
        assert!(s.next_request().is_none());
        s.push(b"a");
        // Now a (long) PMI-1 line, waiting for its newline.
        assert!(s.next_request().is_none());
        assert!(!s.is_pmi2());
        let mut s = PmiStream::new();
        s.push(b"      ");
        assert!(s.next_request().is_none());
        assert!(!s.is_pmi2());
        let mut s = PmiStream::new();
        s.push(format!("{:<6}", MAX_BODY + 1).as_bytes());
        assert!(matches!(
            s.next_request(),
            Some(Request::V2(Err(Wire2Error::LengthOutOfRange(_))))
        ));
    }
}
