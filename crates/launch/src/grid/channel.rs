//! A framed, non-blocking channel over a byte stream (an ssh session's
//! pipes, a local proxy's pipes, or gwrun's own stdin/stdout in proxy
//! mode), with the bootstrap preamble and heartbeat bookkeeping.
//!
//! The owner polls [`Channel::read_fd`] for input and, while
//! [`Channel::wants_write`], [`Channel::write_fd`] for output; nothing here
//! blocks.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::bootstrap::{BootLine, BootReader};
use super::protocol::{encode, Frame, FrameReader, Msg, ProtocolError};
use crate::sys;

/// Output queued beyond this stops the owner from producing more for this
/// channel (it stops reading rank output / file data: back-pressure).
pub const HIGH_WATER: usize = 8 << 20;

#[derive(Debug)]
pub struct Channel {
    rfd: Option<OwnedFd>,
    wfd: Option<OwnedFd>,
    reader: FrameReader,
    /// Until the bootstrap preamble is over (parent side of an ssh start).
    boot: Option<BootReader>,
    out: Vec<u8>,
    out_pos: usize,
    /// Frames queued while the bootstrap is not over: they may only follow
    /// the proxy binary and the Hello ([`Channel::release_held`]).
    held: Vec<u8>,
    /// A write failed (the reading side stays open until EOF).
    write_error: Option<String>,
    pub last_rx: Instant,
    last_tx: Instant,
    /// Why the channel stopped working (EOF, write error, bad bytes).
    pub broken: Option<String>,
}

impl Channel {
    /// `rfd` and `wfd` are made non-blocking.
    pub fn new(rfd: OwnedFd, wfd: OwnedFd, booting: bool) -> Self {
        let _ = sys::set_nonblocking(rfd.as_raw_fd());
        let _ = sys::set_nonblocking(wfd.as_raw_fd());
        let now = Instant::now();
        Channel {
            rfd: Some(rfd),
            wfd: Some(wfd),
            reader: FrameReader::new(),
            boot: booting.then(BootReader::new),
            out: Vec::new(),
            out_pos: 0,
            held: Vec::new(),
            write_error: None,
            last_rx: now,
            last_tx: now,
            broken: None,
        }
    }

    pub fn read_fd(&self) -> Option<RawFd> {
        self.rfd.as_ref().map(|f| f.as_raw_fd())
    }

    pub fn write_fd(&self) -> Option<RawFd> {
        self.wfd.as_ref().map(|f| f.as_raw_fd())
    }

    pub fn queued(&self) -> usize {
        self.out.len() - self.out_pos
    }

    pub fn wants_write(&self) -> bool {
        self.queued() > 0 && self.wfd.is_some()
    }

    pub fn is_open(&self) -> bool {
        self.broken.is_none()
    }

    /// Queues a frame and tries to send what is queued (while booting,
    /// holds it back: the remote side is still a shell reading bytes).
    pub fn send(&mut self, f: &Frame) {
        if self.wfd.is_none() {
            return;
        }
        if self.boot.is_some() {
            encode(f, &mut self.held);
            return;
        }
        if self.out_pos > 0 && self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        encode(f, &mut self.out);
        self.flush();
    }

    pub fn send_msg(&mut self, m: Msg) {
        self.send(&Frame::Msg(m));
    }

    /// Queues raw bytes (the proxy binary during the bootstrap).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if self.wfd.is_some() {
            self.out.extend_from_slice(bytes);
            self.flush();
        }
    }

    /// Sends the frames held back during the bootstrap (after the Hello).
    pub fn release_held(&mut self) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.send_raw(&held);
        }
    }

    /// Writes as much as the stream takes now.
    pub fn flush(&mut self) {
        let Some(fd) = self.write_fd() else {
            return;
        };
        while self.out_pos < self.out.len() {
            match sys::write(fd, &self.out[self.out_pos..]) {
                Ok(n) => {
                    self.out_pos += n;
                    self.last_tx = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    // The far side may have said its last words (Done)
                    // and exited: keep reading what it sent until EOF,
                    // which then reports this error.
                    self.write_error = Some(format!("write failed: {}", sys::os_message(&e)));
                    self.wfd = None;
                    self.out.clear();
                    self.out_pos = 0;
                    return;
                }
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.out_pos > (4 << 20) {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
    }

    /// Reads once; received bytes go to the bootstrap reader or the frame
    /// reader. EOF and errors mark the channel broken.
    pub fn read_some(&mut self, buf: &mut [u8]) {
        let Some(fd) = self.read_fd() else {
            return;
        };
        match sys::read(fd, buf) {
            Ok(0) => {
                let why = self
                    .write_error
                    .take()
                    .unwrap_or_else(|| "connection closed".into());
                self.fail(why)
            }
            Ok(n) => {
                self.last_rx = Instant::now();
                match &mut self.boot {
                    Some(b) => b.push(&buf[..n]),
                    None => self.reader.push(&buf[..n]),
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => self.fail(format!("read failed: {}", sys::os_message(&e))),
        }
    }

    /// The bootstrap line, once it has arrived (then the channel carries
    /// frames). `Err` when the remote side printed something else.
    pub fn take_boot_line(&mut self) -> Option<Result<BootLine, String>> {
        let r = self.boot.as_mut()?.line()?;
        if r.is_ok() {
            if let Some(b) = self.boot.take() {
                self.reader.push(b.leftover());
            }
        }
        Some(r)
    }

    pub fn booting(&self) -> bool {
        self.boot.is_some()
    }

    /// The next complete frame (never while booting).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ProtocolError> {
        if self.boot.is_some() {
            return Ok(None);
        }
        self.reader.next_frame()
    }

    pub fn fail(&mut self, why: String) {
        if self.broken.is_none() {
            self.broken = Some(why);
        }
        self.rfd = None;
    }

    /// Closes both directions (the far side sees EOF).
    pub fn close(&mut self) {
        self.rfd = None;
        self.wfd = None;
        self.out.clear();
        self.out_pos = 0;
        if self.broken.is_none() {
            self.broken = Some("closed".into());
        }
    }

    /// Sends a Ping if nothing was sent for `every`.
    pub fn keep_alive(&mut self, now: Instant, every: Duration) {
        if self.boot.is_none() && self.queued() == 0 && now.duration_since(self.last_tx) >= every {
            self.send_msg(Msg::Ping);
            // A full pipe must not make us send again at once.
            self.last_tx = now;
        }
    }

    /// How long the far side has been silent.
    pub fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames sent while the far side is still the bootstrap shell are
    /// held back (they would be read as proxy binary bytes) until the
    /// bootstrap line came and the Hello went.
    #[test]
    fn frames_wait_for_the_bootstrap() {
        let (a, b) = sys::socketpair().unwrap();
        let a2 = a.try_clone().unwrap();
        let mut c = Channel::new(a, a2, true);
        c.send_msg(Msg::StdinEof);
        let mut buf = [0u8; 256];
        let _ = sys::set_nonblocking(b.as_raw_fd());
        assert!(
            sys::read(b.as_raw_fd(), &mut buf).is_err(),
            "nothing may be written while booting"
        );
        sys::write_all_blocking(b.as_raw_fd(), b"GWBOOT1 have\n");
        std::thread::sleep(Duration::from_millis(20));
        c.read_some(&mut buf);
        assert!(matches!(c.take_boot_line(), Some(Ok(BootLine::Have))));
        c.send_raw(b"HELLO");
        c.release_held();
        std::thread::sleep(Duration::from_millis(20));
        let n = sys::read(b.as_raw_fd(), &mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HELLO"), "{:?}", &buf[..n]);
        let mut r = FrameReader::new();
        r.push(&buf[5..n]);
        assert_eq!(r.next_frame().unwrap(), Some(Frame::Msg(Msg::StdinEof)));
    }
}
