//! Staging on a proxy: deciding whether the program must be staged to
//! this host, asking the parent for the files the host's cache lacks,
//! storing them as they arrive (checked against their hash: the bytes
//! came over the network), serving them on to the hosts below a site
//! leader from its cache, and putting them in a per-job directory.
//!
//! The leader keeps every file any host of its site needs in its own
//! cache, so each file crosses the wide area once per site and the second
//! run of the same program sends nothing.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::protocol::{Frame, Plan, StageEntry, FILE_CHUNK};
use crate::stage::cache::Cache;

/// A file being received.
struct Incoming {
    entry: StageEntry,
    writer: crate::stage::cache::Inserter,
    got: u64,
}

pub struct StageIn {
    entries: Vec<StageEntry>,
    program: String,
    /// Whether this host itself runs a staged copy.
    own: bool,
    /// The program as found on this host (not staged).
    found: Option<PathBuf>,
    cache: Result<Cache, String>,
    /// Hashes asked of the parent (each once).
    requested: Vec<String>,
    incoming: HashMap<String, Incoming>,
    /// Per child: the files still to send it.
    to_child: HashMap<usize, FileQueue>,
    job_dir: Option<PathBuf>,
    job_id: String,
    failed: Option<String>,
}

/// Files to send on one channel, whole and in order, a chunk at a time
/// (so heartbeats and output interleave, and back-pressure applies).
#[derive(Default)]
pub struct FileQueue {
    queue: VecDeque<String>,
    current: Option<(String, std::fs::File)>,
}

impl FileQueue {
    pub fn push(&mut self, hash: String) {
        if !self.queue.contains(&hash) && self.current.as_ref().map(|c| &c.0) != Some(&hash) {
            self.queue.push_back(hash);
        }
    }

    /// The next chunk; `path_of` finds a file by hash (None: not there
    /// yet, try again later).
    pub fn next_chunk(&mut self, path_of: impl Fn(&str) -> Option<PathBuf>) -> Option<Frame> {
        loop {
            if self.current.is_none() {
                let h = self.queue.front()?.clone();
                let f = std::fs::File::open(path_of(&h)?).ok()?;
                self.queue.pop_front();
                self.current = Some((h, f));
            }
            let (h, f) = self.current.as_mut()?;
            let mut buf = vec![0u8; FILE_CHUNK];
            match f.read(&mut buf) {
                Ok(0) | Err(_) => self.current = None,
                Ok(n) => {
                    buf.truncate(n);
                    return Some(Frame::FileData {
                        hash: h.clone(),
                        data: buf,
                    });
                }
            }
        }
    }
}

/// Resolves `program` as execvp would: a path with `/` as is (relative to
/// `wdir` when given), else each `PATH` entry.
pub fn find_program(program: &str, wdir: Option<&str>) -> Option<PathBuf> {
    let is_exe = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    };
    if program.contains('/') {
        let p = match wdir {
            Some(d) if !program.starts_with('/') => Path::new(d).join(program),
            _ => PathBuf::from(program),
        };
        return is_exe(&p).then_some(p);
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| is_exe(p))
}

impl StageIn {
    pub fn new(plan: &Plan, _host: usize) -> StageIn {
        let found = if plan.force_stage {
            None
        } else {
            find_program(&plan.program, plan.wdir.as_deref())
        };
        let own = found.is_none() && !plan.stage.is_empty();
        StageIn {
            entries: plan.stage.clone(),
            program: plan.program.clone(),
            own,
            found,
            cache: Cache::open(None, None),
            requested: Vec::new(),
            incoming: HashMap::new(),
            to_child: HashMap::new(),
            job_dir: None,
            job_id: plan.job_id.clone(),
            failed: None,
        }
    }

    fn entry(&self, hash: &str) -> Option<&StageEntry> {
        self.entries.iter().find(|e| e.hash == hash)
    }

    fn cached(&self, hash: &str) -> Option<PathBuf> {
        self.cache.as_ref().ok()?.has(hash)
    }

    /// The program to run once everything is in place; `Err((code, msg))`
    /// when it cannot be.
    pub fn poll_ready(&mut self) -> Result<Option<PathBuf>, (i32, String)> {
        if let Some(e) = &self.failed {
            return Err((1, e.clone()));
        }
        if let Some(p) = &self.found {
            return Ok(Some(p.clone()));
        }
        if !self.own {
            return Err((
                127,
                format!(
                    "'{}' is not on this host and there is nothing to stage",
                    self.program
                ),
            ));
        }
        let cache = match &self.cache {
            Ok(c) => c,
            Err(e) => return Err((1, format!("staging: {e}"))),
        };
        if self.entries.iter().any(|e| cache.has(&e.hash).is_none()) {
            return Ok(None);
        }
        let dir = std::env::temp_dir().join(format!("gw-job-{}", self.job_id));
        let files: Vec<(String, String, u32)> = self
            .entries
            .iter()
            .map(|e| (e.name.clone(), e.hash.clone(), e.mode))
            .collect();
        cache
            .materialize(&files, &dir)
            .map_err(|e| (1, format!("staging into {}: {e}", dir.display())))?;
        let program = dir.join(&self.entries[0].name);
        let paths: Vec<PathBuf> = self.entries.iter().map(|e| dir.join(&e.name)).collect();
        let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
        crate::stage::elf::check_all_run_here(&refs).map_err(|e| (126, e))?;
        self.job_dir = Some(dir);
        Ok(Some(program))
    }

    /// Hashes to ask the parent for (not cached, not asked yet): this
    /// host's own needs and its children's.
    pub fn take_requests(&mut self) -> Vec<String> {
        let mut want: Vec<String> = Vec::new();
        if self.own {
            want.extend(self.entries.iter().map(|e| e.hash.clone()));
        }
        for q in self.to_child.values() {
            want.extend(q.queue.iter().cloned());
        }
        let mut out = Vec::new();
        for h in want {
            if self.cached(&h).is_none() && !self.requested.contains(&h) && !out.contains(&h) {
                out.push(h);
            }
        }
        self.requested.extend(out.iter().cloned());
        out
    }

    /// A child asks for files (only those the plan names are served).
    pub fn child_needs(&mut self, child: usize, hashes: Vec<String>) {
        let known: Vec<String> = hashes
            .into_iter()
            .filter(|h| self.entry(h).is_some())
            .take(self.entries.len())
            .collect();
        let slot = self.to_child.entry(child).or_default();
        for h in known {
            slot.push(h);
        }
    }

    /// The next chunk for child `i`, from the cache (None: nothing ready).
    pub fn next_chunk_for(&mut self, i: usize) -> Option<Frame> {
        let cache = self.cache.as_ref().ok()?;
        self.to_child.get_mut(&i)?.next_chunk(|h| cache.has(h))
    }

    /// Bytes of a file from the parent.
    pub fn receive(&mut self, hash: &str, data: &[u8]) -> Result<(), String> {
        if !self.incoming.contains_key(hash) {
            let entry = self
                .entry(hash)
                .cloned()
                .ok_or_else(|| format!("file data for {hash}, which the plan does not name"))?;
            if !self.requested.iter().any(|h| h == hash) {
                return Err(format!("file data for {hash}, which was not asked for"));
            }
            let cache = self.cache.as_ref().map_err(|e| e.clone())?;
            let writer = cache
                .begin_insert(hash, entry.size)
                .map_err(|e| format!("staging {}: {e}", entry.name))?;
            self.incoming.insert(
                hash.to_string(),
                Incoming {
                    entry,
                    writer,
                    got: 0,
                },
            );
        }
        let inc = self
            .incoming
            .get_mut(hash)
            .ok_or("internal: lost an incoming file")?;
        let after = inc.got.saturating_add(data.len() as u64);
        if after > inc.entry.size {
            self.incoming.remove(hash);
            return Err(format!("more bytes than announced for staged file {hash}"));
        }
        inc.writer
            .write_all(data)
            .map_err(|e| format!("staging {}: {e}", inc.entry.name))?;
        inc.got = after;
        if inc.got == inc.entry.size {
            if let Some(inc) = self.incoming.remove(hash) {
                let name = inc.entry.name.clone();
                inc.writer
                    .finish()
                    .map_err(|e| format!("staging {name}: {e}"))?;
            }
        }
        Ok(())
    }

    /// The job directory, which holds staged libraries too.
    pub fn library_dir(&self) -> Option<&Path> {
        self.job_dir.as_deref()
    }

    pub fn cleanup(&mut self) {
        if let Ok(c) = &self.cache {
            c.unpin_all();
        }
        if let Some(d) = self.job_dir.take() {
            if let Ok(c) = &self.cache {
                let _ = c.remove_job_dir(&d);
            } else {
                let _ = std::fs::remove_dir_all(&d);
            }
        }
    }
}

/// SHA-256 of bytes, hex (tests).
pub fn sha256_hex(bytes: &[u8]) -> String {
    super::bootstrap::hex(&Sha256::digest(bytes))
}
