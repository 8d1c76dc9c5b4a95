//! Putting the proxy on a host that has no gridwire.
//!
//! The parent (front end or site leader) runs, through the host's start
//! method, a short POSIX `sh` script (no secrets in it: only the proxy
//! binary's hash and size). The script looks for that exact binary in the
//! host's cache, says `GWBOOT1 have` or `GWBOOT1 need` on stdout, in the
//! second case reads exactly `size` bytes from stdin (`head -c`), checks
//! their SHA-256 and stores them, then `exec`s the proxy on the same
//! stdin/stdout — so one ssh session carries the binary, then the
//! protocol. A second job finds the binary cached and sends nothing.
//!
//! The parent does not wait for the script's answer to send the first
//! frame (the Hello): it sends it at once, betting on `have` (every job
//! after the first), which saves a round trip to every host — over a WAN,
//! tens of milliseconds per level of the proxy tree. When the answer is
//! `need`, the script first discards those bytes (`skip`, the frame's
//! length, is its third argument), then reads the binary, and the parent
//! sends the Hello again after it.
//!
//! The cache is `$GW_PROXY_CACHE`, else `$XDG_CACHE_HOME/gridwire/proxy`,
//! else `~/.cache/gridwire/proxy`, one file per proxy version
//! (`gwrun-<sha256>`); storing a version removes all but the three most
//! recently stored (a job still running an older one keeps its open
//! file; one starting with it stages it again). The staged program files
//! live next to it in the stage cache (see `crate::stage`).

use std::path::Path;

/// What the remote script said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootLine {
    Have,
    Need,
}

/// The first line the script prints is at most this long; anything else
/// (a shell's error, a login banner on stdout) is reported, truncated.
const MAX_BOOT_TEXT: usize = 4096;

/// Collects the bootstrap line.
#[derive(Debug, Default)]
pub struct BootReader {
    buf: Vec<u8>,
    taken: usize,
}

impl BootReader {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        // Without a line yet, keep at most the limit; after it, the bytes
        // are the proxy's first frames, taken over at once by the channel.
        if self.buf.len() < MAX_BOOT_TEXT || self.buf.contains(&b'\n') {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// `None` until a line (or too much text) arrived.
    pub fn line(&mut self) -> Option<Result<BootLine, String>> {
        let Some(nl) = self.buf.iter().position(|&b| b == b'\n') else {
            if self.buf.len() >= MAX_BOOT_TEXT {
                return Some(Err(format!(
                    "unexpected output instead of the proxy: {:?}",
                    String::from_utf8_lossy(&self.buf[..200.min(self.buf.len())])
                )));
            }
            return None;
        };
        let line = &self.buf[..nl];
        self.taken = nl + 1;
        Some(match line {
            b"GWBOOT1 have" => Ok(BootLine::Have),
            b"GWBOOT1 need" => Ok(BootLine::Need),
            other => Err(format!(
                "unexpected output instead of the proxy: {:?}",
                String::from_utf8_lossy(&other[..200.min(other.len())])
            )),
        })
    }

    /// Bytes after the line.
    pub fn leftover(&self) -> &[u8] {
        &self.buf[self.taken.min(self.buf.len())..]
    }
}

/// The bootstrap as an argument vector (`sh -c SCRIPT HASH SIZE SKIP`),
/// for start methods that run a command without a shell (srun); with
/// `prefix`, an installed gridwire instead. `skip`: the length of the
/// frame the parent sends before it knows the answer (see above).
pub fn script_argv(hash: &str, size: u64, skip: usize, prefix: Option<&str>) -> Vec<String> {
    if let Some(p) = prefix {
        return vec![
            "sh".into(),
            "-c".into(),
            "echo GWBOOT1 have; exec \"$0/bin/gwrun\" --proxy".into(),
            p.into(),
        ];
    }
    // $0 = hash, $1 = size, $2 = skip. No single quote inside the script (it is
    // quoted whole for ssh's remote shell). The temporary file comes from
    // mktemp: hosts that share a home directory (a shared file system)
    // each have a PID namespace of their own, so `$$` is no unique name.
    let script = concat!(
        "d=\"${GW_PROXY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gridwire/proxy}\"; ",
        "f=\"$d/gwrun-$0\"; ",
        "if [ -x \"$f\" ]; then echo GWBOOT1 have; else ",
        "umask 077; mkdir -p \"$d\" || exit 97; t=$(mktemp \"$f.XXXXXX\") || exit 97; echo GWBOOT1 need; ",
        "if head -c \"$2\" > /dev/null && head -c \"$1\" > \"$t\" && [ \"$(sha256sum < \"$t\" | cut -c1-64)\" = \"$0\" ] && chmod 700 \"$t\" && mv -f \"$t\" \"$f\"; ",
        "then :; else rm -f \"$t\"; echo \"gwrun: cannot store the proxy in $d\" >&2; exit 97; fi; ",
        // Keep the three most recently stored versions: every upgrade
        // of gwrun stores a new one (names are hex: no spaces to split).
        "n=0; for o in $(ls -t \"$d\"); do case $o in gwrun-*.*) ;; gwrun-*) n=$((n+1)); ",
        "if [ $n -gt 3 ]; then rm -f \"$d/$o\"; fi;; esac; done; fi; ",
        "exec \"$f\" --proxy"
    );
    vec![
        "sh".into(),
        "-c".into(),
        script.into(),
        hash.into(),
        size.to_string(),
        skip.to_string(),
    ]
}

/// The command line run on the host by its login shell (ssh): the
/// bootstrap script, or an installed gridwire under `prefix`.
pub fn remote_command(hash: &str, size: u64, skip: usize, prefix: Option<&str>) -> String {
    script_argv(hash, size, skip, prefix)
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// SHA-256 of a file, hex, streaming; remembered while the file is
/// unchanged (`crate::stage::hashes`).
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    crate::stage::hashes::sha256(&f, &meta, path)
}

/// SHA-256 of a file, hex, streaming, always read.
#[cfg(test)]
fn hash_file_uncached(path: &Path) -> std::io::Result<(String, u64)> {
    crate::stage::hash_reader(std::fs::File::open(path)?)
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    #[test]
    fn boot_lines() {
        let mut r = BootReader::new();
        r.push(b"GWBOOT1 ha");
        assert!(r.line().is_none());
        r.push(b"ve\nrest");
        assert_eq!(r.line(), Some(Ok(BootLine::Have)));
        assert_eq!(r.leftover(), b"rest");
        let mut r = BootReader::new();
        r.push(b"sh: 1: head: not found\n");
        assert!(r.line().unwrap().unwrap_err().contains("head: not found"));
        let mut r = BootReader::new();
        r.push(&vec![b'x'; 10_000]);
        assert!(r.line().unwrap().is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/usr/local"), "/usr/local");
        assert_eq!(shell_quote("a b'c"), "'a b'\\''c'");
        assert_eq!(shell_quote(""), "''");
    }

    /// The script, run by a real `sh`: stores a binary it is sent, checks
    /// its hash, then finds it cached.
    #[test]
    fn script_stages_then_finds_the_binary() {
        let dir = std::env::temp_dir().join(format!("gw-boot-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // A "proxy": a shell script that prints its argument, then what
        // it reads (the first frame, sent before the answer).
        let body = b"#!/bin/sh\necho proxy \"$@\"\ncat\n";
        let hello = b"HELLO";
        let with_binary = |binary: &[u8]| [&hello[..], binary, &hello[..]].concat();
        let src = dir.with_extension("src");
        std::fs::write(&src, body).unwrap();
        let (hash, size) = hash_file_uncached(&src).unwrap();
        let run = |send: &[u8]| {
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(remote_command(&hash, size, hello.len(), None))
                .env("GW_PROXY_CACHE", &dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(send).unwrap();
            let out = c.wait_with_output().unwrap();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                out.status.code(),
            )
        };
        let (out, code) = run(&with_binary(body));
        assert_eq!(out, "GWBOOT1 need\nproxy --proxy\nHELLO");
        assert_eq!(code, Some(0));
        let (out, _) = run(hello);
        assert_eq!(out, "GWBOOT1 have\nproxy --proxy\nHELLO");
        // A corrupted transfer is refused.
        std::fs::remove_file(dir.join(format!("gwrun-{hash}"))).unwrap();
        let mut bad = body.to_vec();
        bad[3] ^= 1;
        let (out, code) = run(&with_binary(&bad));
        assert_eq!(out, "GWBOOT1 need\n");
        assert_eq!(code, Some(97));
        assert!(!dir.join(format!("gwrun-{hash}")).exists());
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&src);
    }

    /// Storing a fourth version removes the oldest one; files that are
    /// not stored versions (a transfer in progress) stay.
    #[test]
    fn script_keeps_three_versions() {
        let dir = std::env::temp_dir().join(format!("gw-boot-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let partial = dir.join(format!("gwrun-{}.tmp123", "a".repeat(64)));
        std::fs::write(&partial, b"partial").unwrap();
        let mut hashes = Vec::new();
        for v in 0..4 {
            let body = format!("#!/bin/sh\necho version {v}\n").into_bytes();
            let src = dir.with_extension(format!("src{v}"));
            std::fs::write(&src, &body).unwrap();
            let (hash, size) = hash_file_uncached(&src).unwrap();
            let _ = std::fs::remove_file(&src);
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(remote_command(&hash, size, 0, None))
                .env("GW_PROXY_CACHE", &dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(&body).unwrap();
            let out = c.wait_with_output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                format!("GWBOOT1 need\nversion {v}\n")
            );
            hashes.push(hash);
            // ls -t orders by mtime: keep the stores apart.
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let have = |h: &String| dir.join(format!("gwrun-{h}")).exists();
        assert!(!have(&hashes[0]), "the oldest version is removed");
        assert!(hashes[1..].iter().all(have), "the three newest stay");
        assert!(partial.exists(), "a transfer in progress is not touched");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
