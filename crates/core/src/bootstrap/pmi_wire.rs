//! Sans-IO codec for the PMI-1 wire protocol.
//!
//! PMI-1 (as spoken by MPICH's Hydra, Slurm's `libpmi` and `gwrun`) is a
//! line protocol: each message is one line `cmd=NAME key=value key=value\n`,
//! tokens separated by spaces. Values may contain `=` (everything after the
//! first `=` of a token is the value) but never spaces or newlines. The only
//! exception is the multi-line `mcmd=spawn … endcmd` form used by
//! `PMI_Spawn_multiple`: one `key=value` per line (values may hold spaces),
//! which [`LineBuffer`] returns as one [`Command`] named `spawn`.
//!
//! This module performs no I/O so both sides (the client in
//! [`super::pmi`] and the server in `gwrun`) share one parser and the parser
//! can be tested exhaustively. Malformed input is always an error value,
//! never a panic.

use std::fmt;

/// Longest line accepted by [`LineBuffer`]. Generous: `gwrun` advertises
/// `vallen_max=65536`, plus key, kvsname and command overhead.
pub const MAX_LINE: usize = 128 * 1024;

/// What can be wrong with a PMI-1 line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The line has no tokens at all.
    Empty,
    /// The first token is not `cmd=NAME`.
    NoCommand(String),
    /// A token has no `=` or an empty key.
    BadToken(String),
    /// The line is not valid UTF-8.
    NotUtf8,
    /// A line grew beyond [`MAX_LINE`] without a newline.
    TooLong(usize),
    /// A malformed `mcmd=` block (PMI_Spawn_multiple), or one on a single line.
    SpawnUnsupported,
    /// A key or value contains a character the wire cannot carry.
    BadChar { what: &'static str, text: String },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Empty => write!(f, "empty PMI line"),
            WireError::NoCommand(t) => write!(f, "PMI line does not start with cmd=: {t:?}"),
            WireError::BadToken(t) => write!(f, "malformed PMI token {t:?} (expected key=value)"),
            WireError::NotUtf8 => write!(f, "PMI line is not valid UTF-8"),
            WireError::TooLong(n) => write!(f, "PMI line longer than {n} bytes"),
            WireError::SpawnUnsupported => {
                write!(f, "malformed mcmd= block (PMI_Spawn_multiple)")
            }
            WireError::BadChar { what, text } => {
                write!(
                    f,
                    "PMI {what} {text:?} contains a space, newline or other forbidden character"
                )
            }
        }
    }
}

impl std::error::Error for WireError {}

impl From<WireError> for crate::error::Error {
    fn from(e: WireError) -> Self {
        crate::error::Error::Bootstrap(e.to_string())
    }
}

/// One PMI-1 command: its name (the value of `cmd=`) and its other
/// `key=value` pairs in wire order (order matters to no one, but keeping it
/// makes formatting deterministic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub args: Vec<(String, String)>,
}

/// True if `s` can be carried as a PMI-1 value (non-empty is not required).
pub fn is_wire_value(s: &str) -> bool {
    !s.bytes()
        .any(|b| b == b' ' || b == b'\n' || b == b'\r' || b == b'\t' || b == 0)
}

/// True if `s` can be carried as a PMI-1 key: non-empty, no `=`, and a valid value.
pub fn is_wire_key(s: &str) -> bool {
    !s.is_empty() && !s.contains('=') && is_wire_value(s)
}

impl Command {
    /// A command with no arguments yet.
    pub fn new(name: &str) -> Self {
        Command {
            name: name.to_string(),
            args: Vec::new(),
        }
    }

    /// Builder: appends `key=value`. Validation happens in [`Command::encode`].
    pub fn arg(mut self, key: &str, value: impl ToString) -> Self {
        self.args.push((key.to_string(), value.to_string()));
        self
    }

    /// The value of the first argument named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Like [`Command::get`] but missing is an error naming the command.
    pub fn require(&self, key: &str) -> Result<&str, String> {
        self.get(key)
            .ok_or_else(|| format!("PMI command {:?} lacks {key}=", self.name))
    }

    /// Integer argument; missing or unparsable is an error naming the command.
    pub fn require_int(&self, key: &str) -> Result<i64, String> {
        let v = self.require(key)?;
        v.parse::<i64>()
            .map_err(|_| format!("PMI command {:?}: {key}={v:?} is not an integer", self.name))
    }

    /// The `rc=` of a response, 0 if absent (several responses, e.g.
    /// `barrier_out`, carry none).
    pub fn rc(&self) -> i64 {
        self.get("rc").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// The line for this command, newline included. Errors if the name, a
    /// key or a value cannot be carried on the wire.
    pub fn encode(&self) -> Result<String, WireError> {
        if !is_wire_key(&self.name) {
            return Err(WireError::BadChar {
                what: "command name",
                text: self.name.clone(),
            });
        }
        let mut out = String::with_capacity(
            16 + self
                .args
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>(),
        );
        out.push_str("cmd=");
        out.push_str(&self.name);
        for (k, v) in &self.args {
            if !is_wire_key(k) {
                return Err(WireError::BadChar {
                    what: "key",
                    text: k.clone(),
                });
            }
            if !is_wire_value(v) {
                return Err(WireError::BadChar {
                    what: "value",
                    text: v.clone(),
                });
            }
            out.push(' ');
            out.push_str(k);
            out.push('=');
            out.push_str(v);
        }
        out.push('\n');
        Ok(out)
    }
}

/// Parses one line (with or without its trailing newline).
pub fn parse_line(line: &[u8]) -> Result<Command, WireError> {
    let line = std::str::from_utf8(line).map_err(|_| WireError::NotUtf8)?;
    let line = line.trim_end_matches(['\n', '\r']);
    let mut tokens = line.split([' ', '\t']).filter(|t| !t.is_empty());
    let first = tokens.next().ok_or(WireError::Empty)?;
    if first.starts_with("mcmd=") {
        return Err(WireError::SpawnUnsupported);
    }
    let name = match first.strip_prefix("cmd=") {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => return Err(WireError::NoCommand(first.to_string())),
    };
    let mut args = Vec::new();
    for t in tokens {
        match t.split_once('=') {
            Some((k, v)) if !k.is_empty() => args.push((k.to_string(), v.to_string())),
            _ => return Err(WireError::BadToken(t.to_string())),
        }
    }
    Ok(Command { name, args })
}

/// Accumulates bytes from a stream and yields complete lines.
///
/// Work is linear in the bytes pushed: consumed lines are skipped by an
/// offset (the buffer is compacted only once the consumed part is at least
/// half of it) and the newline search resumes where the last one stopped,
/// so neither many short lines nor one long line pushed in small pieces
/// rescans what was already seen. A line longer than [`MAX_LINE`] is an
/// error; the buffer then holds at most `MAX_LINE` plus one push.
///
/// Once an `mcmd=NAME` line is seen, the buffer collects the `key=value`
/// lines up to `endcmd` into one command `NAME` (at most [`MAX_MCMD_LINES`]
/// of them; a longer or malformed block is one error, and the connection
/// stays in sync at its `endcmd`).
#[derive(Debug, Default)]
pub struct LineBuffer {
    buf: Vec<u8>,
    /// Start of the first unconsumed byte.
    start: usize,
    /// Bytes before this offset (and at or after `start`) hold no newline.
    scanned: usize,
    /// The multi-line command being collected, and whether it broke.
    mcmd: Option<(Command, bool)>,
}

/// Lines one `mcmd=` block may hold (a spawn of many arguments and infos).
pub const MAX_MCMD_LINES: usize = 4096;

impl LineBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends raw bytes read from the stream.
    pub fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered but not yet returned as a line.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete command, `None` if more bytes are needed.
    /// A line too long without a newline is an error (and the buffer is
    /// cleared, since the stream can no longer be trusted).
    pub fn next_command(&mut self) -> Option<Result<Command, WireError>> {
        loop {
            let from = self.scanned.max(self.start);
            let Some(off) = self.buf[from..].iter().position(|&b| b == b'\n') else {
                self.scanned = self.buf.len();
                if self.pending() > MAX_LINE {
                    self.buf.clear();
                    self.start = 0;
                    self.scanned = 0;
                    return Some(Err(WireError::TooLong(MAX_LINE)));
                }
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                    self.scanned = 0;
                }
                return None;
            };
            let nl = from + off;
            let line_start = self.start;
            self.start = nl + 1;
            self.scanned = self.start;
            if nl - line_start > MAX_LINE {
                return Some(Err(WireError::TooLong(MAX_LINE)));
            }
            let body = &self.buf[line_start..nl];
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            if let Some((cmd, broken)) = &mut self.mcmd {
                if body == b"endcmd" {
                    let (cmd, broken) = self.mcmd.take().unwrap_or((Command::new(""), true));
                    return Some(if broken {
                        Err(WireError::SpawnUnsupported)
                    } else {
                        Ok(cmd)
                    });
                }
                let kv = std::str::from_utf8(body)
                    .ok()
                    .and_then(|l| l.split_once('='));
                match kv {
                    Some((k, v)) if !k.is_empty() && cmd.args.len() < MAX_MCMD_LINES => {
                        cmd.args.push((k.trim().to_string(), v.to_string()))
                    }
                    _ => *broken = true,
                }
                continue;
            }
            if let Some(name) = body.strip_prefix(b"mcmd=") {
                let name = std::str::from_utf8(name).unwrap_or("").trim();
                self.mcmd = Some((Command::new(name), name.is_empty()));
                continue;
            }
            if body.iter().all(|b| b.is_ascii_whitespace()) {
                continue; // tolerate blank lines
            }
            return Some(parse_line(body));
        }
    }
}

/// Percent-encodes bytes that the wire cannot carry in a value (space,
/// control characters, `%`), for free text such as an abort message.
pub fn escape_value(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    for b in s.bytes() {
        if b <= b' ' || b == b'%' || b == 0x7f {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    // Only ASCII bytes were replaced by ASCII, so UTF-8 stays valid.
    String::from_utf8(out).unwrap_or_default()
}

/// Inverse of [`escape_value`]; malformed escapes are kept literally.
pub fn unescape_value(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_simple_command() {
        let c = parse_line(b"cmd=put kvsname=kvs_1 key=a value=b=c\n").unwrap();
        assert_eq!(c.name, "put");
        assert_eq!(c.get("kvsname"), Some("kvs_1"));
        assert_eq!(c.get("value"), Some("b=c"));
        assert_eq!(c.get("nope"), None);
    }

    #[test]
    fn tolerates_extra_spaces_and_cr() {
        let c = parse_line(b"  cmd=barrier_out   rc=0 \r\n").unwrap();
        assert_eq!(c.name, "barrier_out");
        assert_eq!(c.rc(), 0);
    }

    #[test]
    fn empty_value_is_allowed() {
        let c = parse_line(b"cmd=get_result rc=0 value=").unwrap();
        assert_eq!(c.get("value"), Some(""));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(parse_line(b""), Err(WireError::Empty));
        assert_eq!(parse_line(b"   \n"), Err(WireError::Empty));
        assert!(matches!(
            parse_line(b"put key=a"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_line(b"cmd= key=a"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_line(b"cmd=put novalue"),
            Err(WireError::BadToken(_))
        ));
        assert!(matches!(
            parse_line(b"cmd=put =x"),
            Err(WireError::BadToken(_))
        ));
        assert_eq!(parse_line(b"cmd=put key=\xff"), Err(WireError::NotUtf8));
        assert_eq!(parse_line(b"mcmd=spawn"), Err(WireError::SpawnUnsupported));
    }

    #[test]
    fn rc_parsing() {
        assert_eq!(parse_line(b"cmd=get_result rc=-1").unwrap().rc(), -1);
        assert_eq!(parse_line(b"cmd=x rc=junk").unwrap().rc(), 0);
        let c = parse_line(b"cmd=set size=4 rank=x").unwrap();
        assert_eq!(c.require_int("size"), Ok(4));
        assert!(c.require_int("rank").is_err());
        assert!(c.require_int("debug").is_err());
    }

    #[test]
    fn encode_roundtrip() {
        let c = Command::new("put")
            .arg("kvsname", "k")
            .arg("key", "a.b")
            .arg("value", "{\"x\":1}");
        let line = c.encode().unwrap();
        assert_eq!(line, "cmd=put kvsname=k key=a.b value={\"x\":1}\n");
        assert_eq!(parse_line(line.as_bytes()).unwrap(), c);
    }

    #[test]
    fn encode_rejects_unsendable() {
        assert!(Command::new("put").arg("key", "a b").encode().is_err());
        assert!(Command::new("put").arg("value", "a\nb").encode().is_err());
        assert!(Command::new("put").arg("k=y", "v").encode().is_err());
        assert!(Command::new("").encode().is_err());
        assert!(Command::new("a b").encode().is_err());
    }

    #[test]
    fn line_buffer_splits_and_reassembles() {
        let mut lb = LineBuffer::new();
        lb.push(b"cmd=init pmi_version=1 pmi_sub");
        assert!(lb.next_command().is_none());
        lb.push(b"version=1\ncmd=get_maxes\n\ncmd=barrier_in\ncmd=par");
        assert_eq!(lb.next_command().unwrap().unwrap().name, "init");
        assert_eq!(lb.next_command().unwrap().unwrap().name, "get_maxes");
        assert_eq!(lb.next_command().unwrap().unwrap().name, "barrier_in");
        assert!(lb.next_command().is_none());
        assert_eq!(lb.pending(), 7);
    }

    #[test]
    fn line_buffer_collects_spawn_block() {
        let mut lb = LineBuffer::new();
        lb.push(b"mcmd=spawn\nnprocs=2\nexecname=/bin/true\narg1=a b\nendcmd\ncmd=finalize\n");
        let spawn = lb.next_command().unwrap().unwrap();
        assert_eq!(spawn.name, "spawn");
        assert_eq!(spawn.get("nprocs"), Some("2"));
        assert_eq!(spawn.get("arg1"), Some("a b"));
        assert_eq!(lb.next_command().unwrap().unwrap().name, "finalize");
        lb.push(b"mcmd=spawn\nno equals sign\nendcmd\ncmd=finalize\n");
        assert_eq!(lb.next_command().unwrap(), Err(WireError::SpawnUnsupported));
        assert_eq!(lb.next_command().unwrap().unwrap().name, "finalize");
        assert!(lb.next_command().is_none());
    }

    #[test]
    fn line_buffer_limits_length() {
        let mut lb = LineBuffer::new();
        lb.push(&vec![b'a'; MAX_LINE + 1]);
        assert_eq!(
            lb.next_command().unwrap(),
            Err(WireError::TooLong(MAX_LINE))
        );
        assert_eq!(lb.pending(), 0);
        lb.push(b"cmd=ok\n");
        assert_eq!(lb.next_command().unwrap().unwrap().name, "ok");
    }

    /// Many short lines in one push, and one long line pushed a byte at a
    /// time: both must parse in time linear in the input (the old buffer
    /// moved the whole rest for every line and rescanned a partial line on
    /// every push, which takes minutes here).
    #[test]
    fn line_buffer_is_linear() {
        // Linear by construction, checked without a clock (a loaded
        // machine makes any time bound either flaky or toothless): no byte
        // is looked at twice, and consumed bytes do not stay buffered.
        let mut lb = LineBuffer::new();
        let lines = 200_000;
        lb.push(&b"cmd=barrier_in\n".repeat(lines));
        let mut n = 0;
        while let Some(r) = lb.next_command() {
            assert_eq!(r.unwrap().name, "barrier_in");
            assert_eq!(
                lb.scanned, lb.start,
                "the next search starts after this line"
            );
            n += 1;
        }
        assert_eq!(n, lines);
        assert!(lb.buf.is_empty(), "consumed lines were dropped");
        let long = format!("cmd=put key=k value={}\n", "v".repeat(MAX_LINE - 64));
        let mut most = 0;
        for b in long.as_bytes() {
            lb.push(std::slice::from_ref(b));
            if *b != b'\n' {
                assert!(lb.next_command().is_none());
                // Everything seen is remembered as newline-free: the next
                // search looks at the new byte only.
                assert_eq!(lb.scanned, lb.buf.len());
            }
            most = most.max(lb.buf.len());
        }
        assert!(most <= long.len(), "the buffer holds the one line at most");
        assert_eq!(lb.next_command().unwrap().unwrap().name, "put");
        assert_eq!(lb.pending(), 0);
    }

    #[test]
    fn escape_roundtrip() {
        for s in [
            "plain",
            "a b\nc",
            "100% done",
            "ünïcode spaced",
            "",
            "%",
            "%4",
            "%zz",
        ] {
            let e = escape_value(s);
            assert!(is_wire_value(&e), "{e:?}");
            assert_eq!(unescape_value(&e), s);
        }
        assert_eq!(unescape_value("%4"), "%4");
        assert_eq!(unescape_value("%zz1"), "%zz1");
    }

    #[test]
    fn garbage_never_panics() {
        // A cheap deterministic fuzz: every prefix of a mixed buffer.
        let junk: Vec<u8> = (0..2000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for n in 0..junk.len() {
            let _ = parse_line(&junk[..n]);
        }
        let mut lb = LineBuffer::new();
        lb.push(&junk);
        while let Some(_r) = lb.next_command() {}
        for s in ["%", "%%", "%f", "a%", "\u{e9}%"] {
            let _ = unescape_value(s);
        }
    }
}
