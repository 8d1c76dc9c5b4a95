//! A task's connection to the coordinator: requests and replies in order,
//! and events (`EXIT <tid>`, host additions and deletions), which a reader thread turns into the core's
//! membership events (`Context::peer_departed`).

use crate::conn::Conn;
use crate::consts::*;
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

pub struct Coord {
    /// The writer and the reply channel, held together so replies pair up.
    chan: Mutex<(Conn, mpsc::Receiver<String>)>,
}

impl Coord {
    /// Wraps a connection; `on_event` runs on the reader thread for every
    /// event line (`EXIT <tid>`, `HOSTADD <dtid>`, `HOSTDEL <dtid>`).
    pub fn new(s: Conn, on_event: impl Fn(&str, i32) + Send + 'static) -> std::io::Result<Coord> {
        let r = s.try_clone()?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("gwpvm-coord".into())
            .spawn(move || {
                for line in BufReader::new(r).lines() {
                    let Ok(line) = line else { break };
                    if !line.starts_with("OK") && !line.starts_with("ERR") {
                        let mut w = line.split_whitespace();
                        if let (Some(ev), Some(Ok(v))) = (w.next(), w.next().map(str::parse)) {
                            on_event(ev, v);
                        }
                    } else if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Coord {
            chan: Mutex::new((s, rx)),
        })
    }

    /// Sends one request and returns the text after `OK`, or a PVM error code.
    pub fn request(&self, line: &str) -> Result<String, i32> {
        let mut g = self.chan.lock().unwrap_or_else(|e| e.into_inner());
        let (w, rx) = &mut *g;
        w.write_all(format!("{line}\n").as_bytes())
            .map_err(|_| PVM_SYS_ERR)?;
        // Barriers wait for the slowest member: no deadline but the
        // coordinator's life (the channel closes when it goes).
        let reply = loop {
            match rx.recv_timeout(Duration::from_secs(3600)) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(PVM_SYS_ERR),
            }
        };
        if let Some(rest) = reply.strip_prefix("OK") {
            return Ok(rest.trim().to_string());
        }
        Err(reply
            .strip_prefix("ERR ")
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(PVM_SYS_ERR))
    }

    /// Closes the connection: the coordinator takes this task as gone.
    pub fn close(&self) {
        let g = self.chan.lock().unwrap_or_else(|e| e.into_inner());
        g.0.shutdown();
    }
}
