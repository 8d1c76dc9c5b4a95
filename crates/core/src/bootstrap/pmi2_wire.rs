//! Sans-IO codec for the PMI-2 wire protocol.
//!
//! What the servers gridwire meets actually do (MPICH's PMI-2 client
//! library and its `pmi-2.0.txt` message list, Hydra 4.0's proxy, Slurm's
//! `mpi/pmi2` plugin; checked against Debian's Hydra 4.0.2):
//!
//! - The very first exchange is a PMI-1 *line*: the client writes
//!   `cmd=init pmi_version=2 pmi_subversion=0\n` and the server answers one
//!   `cmd=response_to_init … rc=0\n` line. Only then do both sides switch to
//!   PMI-2 framing. That line is parsed with [`super::pmi_wire::parse_line`].
//! - Every later message is a frame: a 6-byte ASCII decimal length of the
//!   body, then the body. MPICH's client and Slurm pad the number with
//!   trailing spaces (`"26    "`), Hydra with leading ones (`"    26"`); both
//!   read it with `atoi`, so either form is accepted here and the client
//!   writes the left-aligned one.
//! - The body is `cmd=NAME;key=value;key=value;` — every pair ends with
//!   `;`. MPICH's spec escapes a `;` inside a value as `;;`; Slurm's plugin
//!   says it does not support that escape and Hydra 4.0.2 cut a value at the
//!   first `;` when tried, so the client never *sends* a `;` in a key or
//!   value (a clear error instead) but reads `;;` back as `;`.
//! - MPICH caps a whole command at 64 KiB, a key at 64 bytes and a value at
//!   1024; a 6-digit length could announce up to 999 999 bytes, which this
//!   codec refuses before buffering anything that large.
//!
//! Malformed input is always an error value, never a panic; buffering is
//! bounded by one frame plus one read.

use std::fmt;

use super::pmi_wire::{parse_line, Command, WireError};

/// Width of the length field in front of every PMI-2 body.
pub const LEN_FIELD: usize = 6;

/// Longest body accepted or sent (MPICH's `PMII_MAX_COMMAND_LEN`).
pub const MAX_BODY: usize = 64 * 1024;

/// Longest PMI-1 style `response_to_init` line accepted before framing starts.
pub const MAX_INIT_LINE: usize = 1024;

/// What can be wrong with PMI-2 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire2Error {
    /// The 6-byte length field is not a decimal number (padded with spaces).
    BadLength(String),
    /// The length field announces more than [`MAX_BODY`] bytes (or zero).
    LengthOutOfRange(usize),
    /// The body is not valid UTF-8.
    NotUtf8,
    /// The body does not start with `cmd=NAME`.
    NoCommand(String),
    /// A pair has no `=` or an empty key.
    BadPair(String),
    /// The init line is longer than [`MAX_INIT_LINE`] or unparsable.
    InitLine(String),
    /// A key or value the client wanted to send cannot be carried.
    Unsendable { what: &'static str, text: String },
    /// The body to send exceeds [`MAX_BODY`].
    TooLong(usize),
}

impl fmt::Display for Wire2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wire2Error::BadLength(t) => {
                write!(f, "PMI-2 length field {t:?} is not a decimal number")
            }
            Wire2Error::LengthOutOfRange(n) => write!(
                f,
                "PMI-2 length field announces {n} bytes (allowed: 1 to {MAX_BODY})"
            ),
            Wire2Error::NotUtf8 => write!(f, "PMI-2 message is not valid UTF-8"),
            Wire2Error::NoCommand(t) => {
                write!(f, "PMI-2 message does not start with cmd=NAME: {t:?}")
            }
            Wire2Error::BadPair(t) => {
                write!(f, "malformed PMI-2 pair {t:?} (expected key=value;)")
            }
            Wire2Error::InitLine(t) => write!(f, "unusable reply to the PMI init line: {t}"),
            Wire2Error::Unsendable { what, text } => write!(
                f,
                "PMI-2 {what} {text:?} is empty or contains ';', '=' (in a key) or a control character"
            ),
            Wire2Error::TooLong(n) => {
                write!(f, "PMI-2 message of {n} bytes exceeds {MAX_BODY}")
            }
        }
    }
}

impl std::error::Error for Wire2Error {}

impl From<Wire2Error> for crate::error::Error {
    fn from(e: Wire2Error) -> Self {
        crate::error::Error::Bootstrap(e.to_string())
    }
}

/// True if `s` can be sent as a PMI-2 value: no `;` (see the module
/// documentation) and no control character.
pub fn is_v2_value(s: &str) -> bool {
    !s.bytes().any(|b| b == b';' || b < 0x20 || b == 0x7f)
}

/// True if `s` can be sent as a PMI-2 key: non-empty, no `=`, a valid value.
pub fn is_v2_key(s: &str) -> bool {
    !s.is_empty() && !s.contains('=') && is_v2_value(s)
}

/// The frame for `cmd`: length field, then `cmd=NAME;k=v;…;`.
pub fn encode(cmd: &Command) -> Result<Vec<u8>, Wire2Error> {
    if !is_v2_key(&cmd.name) {
        return Err(Wire2Error::Unsendable {
            what: "command name",
            text: cmd.name.clone(),
        });
    }
    let mut body = String::new();
    body.push_str("cmd=");
    body.push_str(&cmd.name);
    body.push(';');
    for (k, v) in &cmd.args {
        if !is_v2_key(k) {
            return Err(Wire2Error::Unsendable {
                what: "key",
                text: k.clone(),
            });
        }
        if !is_v2_value(v) {
            return Err(Wire2Error::Unsendable {
                what: "value",
                text: v.clone(),
            });
        }
        body.push_str(k);
        body.push('=');
        body.push_str(v);
        body.push(';');
        if body.len() > MAX_BODY {
            return Err(Wire2Error::TooLong(body.len()));
        }
    }
    if body.len() > MAX_BODY {
        return Err(Wire2Error::TooLong(body.len()));
    }
    let mut out = format!("{:<width$}", body.len(), width = LEN_FIELD).into_bytes();
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}

/// Reads the 6-byte length field: digits, padded with spaces on either side.
pub fn parse_length(field: &[u8]) -> Result<usize, Wire2Error> {
    let shown = || String::from_utf8_lossy(field).into_owned();
    let text = std::str::from_utf8(field).map_err(|_| Wire2Error::BadLength(shown()))?;
    let digits = text.trim_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Wire2Error::BadLength(shown()));
    }
    // At most six digits, so this cannot overflow.
    let n: usize = digits.parse().map_err(|_| Wire2Error::BadLength(shown()))?;
    if n == 0 || n > MAX_BODY {
        return Err(Wire2Error::LengthOutOfRange(n));
    }
    Ok(n)
}

/// Parses one body `cmd=NAME;key=value;…` (the final `;` may be missing).
/// `;;` inside a value stands for one `;`.
pub fn parse_body(body: &[u8]) -> Result<Command, Wire2Error> {
    let text = std::str::from_utf8(body).map_err(|_| Wire2Error::NotUtf8)?;
    let mut pairs: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ';' {
            if chars.peek() == Some(&';') {
                chars.next();
                cur.push(';');
            } else {
                pairs.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        pairs.push(cur);
    }
    let mut iter = pairs.into_iter();
    let first = iter.next().unwrap_or_default();
    let name = match first.strip_prefix("cmd=") {
        Some(n) if !n.is_empty() && !n.contains('=') => n.to_string(),
        _ => return Err(Wire2Error::NoCommand(first)),
    };
    let mut args = Vec::new();
    for p in iter {
        match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => args.push((k.to_string(), v.to_string())),
            _ => return Err(Wire2Error::BadPair(p)),
        }
    }
    Ok(Command { name, args })
}

/// Accumulates bytes from the launcher: first the init line, then frames.
///
/// Consumed bytes are skipped by an offset and compacted only once they
/// are at least half the buffer, so work stays linear in the bytes pushed.
/// Callers read more only while [`Frames::next_frame`] (or
/// [`Frames::next_init_line`]) says `None`, and both give up with an error
/// once an item could not fit, so the buffer holds at most one frame
/// ([`LEN_FIELD`] + [`MAX_BODY`]) plus one push.
#[derive(Debug, Default)]
pub struct Frames {
    buf: Vec<u8>,
    start: usize,
}

impl Frames {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends raw bytes read from the stream.
    pub fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered but not yet returned.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    fn rest(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The PMI-1 style reply to `cmd=init` (one line), `None` if more bytes
    /// are needed. Bytes after the newline stay for [`Frames::next_frame`].
    pub fn next_init_line(&mut self) -> Option<Result<Command, Wire2Error>> {
        let rest = self.rest();
        let window = &rest[..rest.len().min(MAX_INIT_LINE)];
        let Some(nl) = window.iter().position(|&b| b == b'\n') else {
            if rest.len() >= MAX_INIT_LINE {
                return Some(Err(Wire2Error::InitLine(format!(
                    "no newline within {MAX_INIT_LINE} bytes"
                ))));
            }
            return None;
        };
        let line = &rest[..nl];
        let r = parse_line(line).map_err(|e: WireError| Wire2Error::InitLine(e.to_string()));
        self.start += nl + 1;
        Some(r)
    }

    /// The next complete message, `None` if more bytes are needed. A bad
    /// length field is an error and leaves the stream unusable (there is no
    /// way to find the next frame), which the client treats as fatal.
    pub fn next_frame(&mut self) -> Option<Result<Command, Wire2Error>> {
        let rest = self.rest();
        if rest.len() < LEN_FIELD {
            return None;
        }
        let len = match parse_length(&rest[..LEN_FIELD]) {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        let total = LEN_FIELD + len;
        if rest.len() < total {
            return None;
        }
        let r = parse_body(&rest[LEN_FIELD..total]);
        self.start += total;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        let mut v = format!("{:<6}", body.len()).into_bytes();
        v.extend_from_slice(body.as_bytes());
        v
    }

    #[test]
    fn encodes_like_mpich() {
        let c = Command::new("fullinit")
            .arg("pmirank", 3)
            .arg("threaded", "FALSE");
        let f = encode(&c).unwrap();
        assert_eq!(f, b"38    cmd=fullinit;pmirank=3;threaded=FALSE;");
        let mut fr = Frames::new();
        fr.push(&f);
        assert_eq!(fr.next_frame().unwrap().unwrap(), c);
        assert_eq!(fr.pending(), 0);
    }

    #[test]
    fn parses_hydra_and_slurm_replies() {
        // Hydra right-aligns the length, Slurm left-aligns it.
        let mut fr = Frames::new();
        fr.push(b"    26cmd=kvs-put-response;rc=0;");
        fr.push(b"45    cmd=kvs-get-response;found=TRUE;value=a;rc=0;");
        let a = fr.next_frame().unwrap().unwrap();
        assert_eq!((a.name.as_str(), a.rc()), ("kvs-put-response", 0));
        let b = fr.next_frame().unwrap().unwrap();
        assert_eq!(b.get("value"), Some("a"));
        assert_eq!(b.get("found"), Some("TRUE"));
        assert!(fr.next_frame().is_none());
    }

    #[test]
    fn escaped_semicolon_and_missing_final_separator() {
        let c = parse_body(b"cmd=x;value=a;;b=c;k=").unwrap();
        assert_eq!(c.get("value"), Some("a;b=c"));
        assert_eq!(c.get("k"), Some(""));
    }

    #[test]
    fn init_line_then_frames_in_one_push() {
        let mut fr = Frames::new();
        let mut data = b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec();
        data.extend_from_slice(&frame("cmd=fullinit-response;rank=1;size=3;rc=0;"));
        fr.push(&data[..20]);
        assert!(fr.next_init_line().is_none());
        fr.push(&data[20..]);
        let l = fr.next_init_line().unwrap().unwrap();
        assert_eq!(l.name, "response_to_init");
        assert_eq!(l.get("pmi_version"), Some("2"));
        let f = fr.next_frame().unwrap().unwrap();
        assert_eq!(f.require_int("size"), Ok(3));
    }

    #[test]
    fn hostile_length_fields() {
        for bad in [
            &b"abcdef"[..],
            b"      ",
            b"12 3  ",
            b"-1    ",
            b"+5    ",
            b"0x10  ",
            b"\xff\xfe  12",
            b"1\n    ",
        ] {
            assert!(
                matches!(parse_length(bad), Err(Wire2Error::BadLength(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_length(b"999999"),
            Err(Wire2Error::LengthOutOfRange(999_999))
        );
        assert_eq!(
            parse_length(b"0     "),
            Err(Wire2Error::LengthOutOfRange(0))
        );
        assert_eq!(parse_length(b"65536 "), Ok(MAX_BODY));
        assert_eq!(
            parse_length(b"65537 "),
            Err(Wire2Error::LengthOutOfRange(65537))
        );
        // A hostile length is reported before any body is buffered.
        let mut fr = Frames::new();
        fr.push(b"999999");
        assert!(matches!(
            fr.next_frame(),
            Some(Err(Wire2Error::LengthOutOfRange(_)))
        ));
    }

    #[test]
    fn truncated_frames_wait_for_more() {
        let f = frame("cmd=kvs-fence-response;rc=0;");
        for cut in 0..f.len() {
            let mut fr = Frames::new();
            fr.push(&f[..cut]);
            assert!(fr.next_frame().is_none(), "cut at {cut}");
            fr.push(&f[cut..]);
            assert_eq!(fr.next_frame().unwrap().unwrap().name, "kvs-fence-response");
        }
    }

    #[test]
    fn hostile_bodies() {
        assert!(matches!(
            parse_body(b"rc=0;"),
            Err(Wire2Error::NoCommand(_))
        ));
        assert!(matches!(
            parse_body(b"cmd=;"),
            Err(Wire2Error::NoCommand(_))
        ));
        assert!(matches!(parse_body(b";"), Err(Wire2Error::NoCommand(_))));
        assert!(matches!(
            parse_body(b"cmd=x;novalue;"),
            Err(Wire2Error::BadPair(_))
        ));
        assert!(matches!(
            parse_body(b"cmd=x;=v;"),
            Err(Wire2Error::BadPair(_))
        ));
        assert_eq!(parse_body(b"cmd=x;v=\xff;"), Err(Wire2Error::NotUtf8));
        let mut fr = Frames::new();
        fr.push(&frame("garbage"));
        assert!(matches!(
            fr.next_frame(),
            Some(Err(Wire2Error::NoCommand(_)))
        ));
    }

    #[test]
    fn overlong_init_line_is_an_error() {
        let mut fr = Frames::new();
        fr.push(&vec![b'a'; MAX_INIT_LINE]);
        assert!(matches!(
            fr.next_init_line(),
            Some(Err(Wire2Error::InitLine(_)))
        ));
        let mut fr = Frames::new();
        fr.push(b"not a pmi line\n");
        assert!(matches!(
            fr.next_init_line(),
            Some(Err(Wire2Error::InitLine(_)))
        ));
    }

    #[test]
    fn encode_refuses_what_servers_cannot_read() {
        for c in [
            Command::new("kvs-put").arg("key", "a;b"),
            Command::new("kvs-put").arg("value", "a;b"),
            Command::new("kvs-put").arg("k=y", "v"),
            Command::new("kvs-put").arg("", "v"),
            Command::new("kvs-put").arg("v", "a\nb"),
            Command::new("kvs-put").arg("v", "a\0b"),
            Command::new(""),
            Command::new("a;b"),
        ] {
            assert!(
                matches!(encode(&c), Err(Wire2Error::Unsendable { .. })),
                "{c:?}"
            );
        }
        let big = Command::new("kvs-put").arg("value", "x".repeat(MAX_BODY));
        assert!(matches!(encode(&big), Err(Wire2Error::TooLong(_))));
    }

    #[test]
    fn many_small_frames_parse_in_linear_time() {
        let start = std::time::Instant::now();
        let f = frame("cmd=kvs-fence-response;rc=0;");
        let n = 100_000;
        let mut fr = Frames::new();
        fr.push(&f.repeat(n));
        let mut got = 0;
        while let Some(r) = fr.next_frame() {
            r.unwrap();
            got += 1;
        }
        assert_eq!(got, n);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn garbage_never_panics() {
        let junk: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for n in 0..junk.len() {
            let _ = parse_body(&junk[..n]);
            let _ = parse_length(&junk[..n.min(LEN_FIELD)]);
        }
        let mut fr = Frames::new();
        fr.push(&junk);
        let _ = fr.next_init_line();
        for _ in 0..100 {
            if fr.next_frame().is_none() {
                break;
            }
        }
    }
}
