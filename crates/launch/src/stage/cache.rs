//! The receiving side of staging: a content-addressed cache of staged
//! files, shared by every gwrun (proxy) of one user on a host.
//!
//! Layout: `DIR/<sha256 hex>` entries (mode 0500: a job that writes to its
//! hard-linked copy must not change the cache), `DIR/.tmp-*` files being
//! received, `DIR/.lock`. The directory is 0700 and must be ours: an entry
//! is trusted on a hit without being hashed again.
//!
//! Concurrency: inserts, hits, evictions and materializations take an
//! exclusive `flock` on `.lock`, so one process's eviction never races
//! another's link or rename. Pins are shared `flock`s on the entries
//! themselves, held by the [`Cache`] that looked the entry up or inserted it
//! until [`Cache::unpin`] or drop: an evictor skips an entry it cannot lock
//! exclusively, and a crashed process's pins vanish with it. An entry with
//! more than one link is in some job directory and is not evicted either
//! (removing it would free nothing). A `.tmp-*` file is locked by its
//! writer; one nobody holds is a crashed insert's and is removed.
//!
//! Least recently used: the entry's mtime, set to now on every hit and
//! materialization.

use super::{to_hex, validate_hash, validate_name};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The bound when neither the caller nor `GW_STAGE_CACHE_MAX` gives one.
pub const DEFAULT_MAX: u64 = 2 << 30;
/// Entries are read-only for their owner, executable (see the module doc).
const ENTRY_MODE: u32 = 0o500;
const LOCK_FILE: &str = ".lock";
const TEMP_PREFIX: &str = ".tmp-";

/// A staging cache directory; clones share pins.
#[derive(Clone, Debug)]
pub struct Cache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    max: u64,
    /// hash → the open entry holding our shared flock.
    pins: Mutex<HashMap<String, File>>,
}

/// The cache directory from the environment: `$GW_STAGE_CACHE`, else
/// `$XDG_CACHE_HOME/gridwire/stage`, else `$HOME/.cache/gridwire/stage`.
pub fn default_dir() -> Result<PathBuf, String> {
    default_dir_from(|k| std::env::var_os(k))
}

fn default_dir_from(get: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    let set = |k: &str| get(k).filter(|v| !v.is_empty());
    if let Some(d) = set("GW_STAGE_CACHE") {
        return Ok(PathBuf::from(d));
    }
    // XDG: a relative value is invalid and ignored.
    if let Some(d) = set("XDG_CACHE_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Ok(Path::new(&d).join("gridwire/stage"));
    }
    if let Some(home) = set("HOME") {
        return Ok(Path::new(&home).join(".cache/gridwire/stage"));
    }
    Err("no stage cache directory: set GW_STAGE_CACHE (or HOME)".into())
}

/// `GW_STAGE_CACHE_MAX`, or [`DEFAULT_MAX`] when unset.
pub fn default_max() -> Result<u64, String> {
    match std::env::var("GW_STAGE_CACHE_MAX") {
        Ok(v) => parse_max(&v).map_err(|e| format!("GW_STAGE_CACHE_MAX={v:?}: {e}")),
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(format!("GW_STAGE_CACHE_MAX={v:?}: not a size in bytes"))
        }
    }
}

/// Bytes, optionally with a binary suffix: `2147483648`, `512M`, `2G`,
/// `2GiB`, `1t`.
pub fn parse_max(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    let bad = || format!("not a size in bytes (like 2147483648, 512M or 2G): {s:?}");
    if digits.is_empty() || digits.len() > 20 {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let v = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if v == 0 {
        return Err("the stage cache bound must be more than 0 bytes".into());
    }
    Ok(v)
}

fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let r = unsafe { libc::flock(file.as_raw_fd(), op) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Locks a file exclusively if nobody holds it; Ok(false) if somebody does.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    match flock(file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The cache directory's `.lock`, held exclusively until dropped.
struct DirLock(#[allow(dead_code)] File);

impl Cache {
    /// Opens (creating, 0700) the cache at `dir` (default: [`default_dir`])
    /// bounded to `max` bytes (default: [`default_max`]), removes what
    /// crashed inserts left and evicts down to the bound.
    pub fn open(dir: Option<PathBuf>, max: Option<u64>) -> Result<Cache, String> {
        let dir = match dir {
            Some(d) => d,
            None => default_dir()?,
        };
        let max = match max {
            Some(0) => return Err("the stage cache bound must be more than 0 bytes".into()),
            Some(m) => m,
            None => default_max()?,
        };
        let shown = dir.display().to_string();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("stage cache {shown}: {e}"))?;
        let meta = fs::metadata(&dir).map_err(|e| format!("stage cache {shown}: {e}"))?;
        if !meta.is_dir() {
            return Err(format!("stage cache {shown}: not a directory"));
        }
        if meta.uid() != euid() {
            return Err(format!(
                "stage cache {shown}: owned by uid {}, not by us (uid {}): \
                 its files would run unchecked",
                meta.uid(),
                euid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("stage cache {shown}: {e}"))?;
        }
        let cache = Cache {
            inner: Arc::new(Inner {
                dir,
                max,
                pins: Mutex::new(HashMap::new()),
            }),
        };
        let _lock = cache.lock()?;
        cache.evict_locked(None)?;
        Ok(cache)
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn max(&self) -> u64 {
        self.inner.max
    }

    fn entry_path(&self, hash: &str) -> PathBuf {
        self.inner.dir.join(hash)
    }

    fn err(&self, e: impl std::fmt::Display) -> String {
        format!("stage cache {}: {e}", self.inner.dir.display())
    }

    fn lock(&self) -> Result<DirLock, String> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.inner.dir.join(LOCK_FILE))
            .map_err(|e| self.err(format!("{LOCK_FILE}: {e}")))?;
        flock(&f, libc::LOCK_EX).map_err(|e| self.err(format!("locking {LOCK_FILE}: {e}")))?;
        Ok(DirLock(f))
    }

    /// Pins the entry (a shared flock held until unpinned) and marks it
    /// used. Call with the directory lock held.
    fn pin_locked(&self, hash: &str) -> io::Result<PathBuf> {
        let path = self.entry_path(hash);
        let f = File::open(&path)?;
        if !f.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        flock(&f, libc::LOCK_SH)?;
        // The use stamp; an entry we cannot stamp is still usable.
        let _ = f.set_modified(SystemTime::now());
        let mut pins = self.inner.pins.lock().unwrap_or_else(|e| e.into_inner());
        pins.entry(hash.to_string()).or_insert(f);
        Ok(path)
    }

    /// The entry for `hash` if the cache has it: pinned (not evicted while
    /// this cache is open, until [`Cache::unpin`]) and marked used. An
    /// invalid hash is simply not there.
    pub fn has(&self, hash: &str) -> Option<PathBuf> {
        validate_hash(hash).ok()?;
        let _lock = self.lock().ok()?;
        self.pin_locked(hash).ok()
    }

    /// Releases our pin of `hash` (it may be evicted from now on).
    pub fn unpin(&self, hash: &str) {
        let mut pins = self.inner.pins.lock().unwrap_or_else(|e| e.into_inner());
        pins.remove(hash);
    }

    /// Releases every pin of this cache (and its clones).
    pub fn unpin_all(&self) {
        let mut pins = self.inner.pins.lock().unwrap_or_else(|e| e.into_inner());
        pins.clear();
    }

    /// Starts receiving the `size` bytes whose sha256 is `hash`. Write them
    /// to the [`Inserter`], then [`Inserter::finish`]. A size larger than
    /// the cache's bound is refused up front.
    pub fn begin_insert(&self, hash: &str, size: u64) -> Result<Inserter, String> {
        validate_hash(hash)?;
        if size > self.inner.max {
            return Err(self.err(format!(
                "a file of {size} bytes does not fit in its bound of {} bytes \
                 (GW_STAGE_CACHE_MAX)",
                self.inner.max
            )));
        }
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let temp = self.inner.dir.join(format!(
            "{TEMP_PREFIX}{}-{nanos}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| self.err(format!("{}: {e}", temp.display())))?;
        // Ours while we write: the stale-temp sweep leaves locked ones.
        flock(&file, libc::LOCK_EX).map_err(|e| self.err(e))?;
        Ok(Inserter {
            cache: self.clone(),
            hash: hash.to_string(),
            size,
            temp,
            file: Some(io::BufWriter::with_capacity(256 * 1024, file)),
            hasher: Sha256::new(),
            written: 0,
        })
    }

    /// Removes least recently used entries until the total is within the
    /// bound, skipping `keep`, pinned entries and entries linked into a job
    /// directory. Removes temp files nobody is writing. Call with the
    /// directory lock held.
    fn evict_locked(&self, keep: Option<&str>) -> Result<(), String> {
        struct Entry {
            path: PathBuf,
            size: u64,
            used: SystemTime,
            links: u64,
            keep: bool,
        }
        let mut entries = Vec::new();
        let mut total: u64 = 0;
        let listing = fs::read_dir(&self.inner.dir).map_err(|e| self.err(e))?;
        for item in listing {
            let item = item.map_err(|e| self.err(e))?;
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = item.path();
            if name.starts_with(TEMP_PREFIX) {
                if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                    if try_lock_exclusive(&f).unwrap_or(false) {
                        let _ = fs::remove_file(&path);
                    }
                }
                continue;
            }
            if validate_hash(name).is_err() {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            total = total.saturating_add(meta.len());
            entries.push(Entry {
                path,
                size: meta.len(),
                used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                links: meta.nlink(),
                keep: keep == Some(name),
            });
        }
        if total <= self.inner.max {
            return Ok(());
        }
        entries.sort_by_key(|e| e.used);
        for e in entries {
            if total <= self.inner.max {
                break;
            }
            if e.keep || e.links > 1 {
                continue;
            }
            let Ok(f) = File::open(&e.path) else { continue };
            // Pinned by a job somewhere (this process or another).
            if !try_lock_exclusive(&f).unwrap_or(false) {
                continue;
            }
            if fs::remove_file(&e.path).is_ok() {
                total = total.saturating_sub(e.size);
            }
        }
        Ok(())
    }

    /// Makes `job_dir` (0700; an existing empty-or-not directory of ours is
    /// used as it is) and puts each `(name, hash, mode)` there under its
    /// name: a hard link to the entry for an executable mode (read-only,
    /// 0500), a copy (0600) for a mode without any exec bit, and a copy
    /// (0700) where the link fails (another file system). A failure
    /// removes a job directory this call created.
    pub fn materialize<N: AsRef<str>, H: AsRef<str>>(
        &self,
        files: &[(N, H, u32)],
        job_dir: &Path,
    ) -> Result<(), String> {
        let mut names = std::collections::HashSet::new();
        for (name, hash, _) in files {
            let (name, hash) = (name.as_ref(), hash.as_ref());
            validate_name(name)?;
            validate_hash(hash).map_err(|e| format!("{name}: {e}"))?;
            if !names.insert(name) {
                return Err(format!("{name:?} is staged twice"));
            }
        }
        let shown = job_dir.display().to_string();
        let created = match fs::DirBuilder::new().mode(0o700).create(job_dir) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta =
                    fs::symlink_metadata(job_dir).map_err(|e| format!("job dir {shown}: {e}"))?;
                if !meta.is_dir() {
                    return Err(format!("job dir {shown}: exists and is not a directory"));
                }
                if meta.uid() != euid() {
                    return Err(format!("job dir {shown}: owned by uid {}", meta.uid()));
                }
                false
            }
            Err(e) => return Err(format!("job dir {shown}: {e}")),
        };
        // The mode of a new directory is masked by the umask.
        let result = fs::set_permissions(job_dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("job dir {shown}: {e}"))
            .and_then(|()| self.fill_job_dir(files, job_dir));
        if result.is_err() && created {
            let _ = self.remove_job_dir(job_dir);
        }
        result
    }

    fn fill_job_dir<N: AsRef<str>, H: AsRef<str>>(
        &self,
        files: &[(N, H, u32)],
        job_dir: &Path,
    ) -> Result<(), String> {
        // No eviction between our look at an entry and its link or copy.
        let _lock = self.lock()?;
        for (name, hash, mode) in files {
            let (name, hash) = (name.as_ref(), hash.as_ref());
            let entry = self.entry_path(hash);
            let dest = job_dir.join(name);
            let source = File::open(&entry).map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    self.err(format!("{name}: {hash} is not in the cache"))
                } else {
                    self.err(format!("{name}: {e}"))
                }
            })?;
            let _ = source.set_modified(SystemTime::now());
            let executable = mode & 0o111 != 0;
            if executable && fs::hard_link(&entry, &dest).is_ok() {
                continue;
            }
            let copy_mode = if executable { 0o700 } else { 0o600 };
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(copy_mode)
                .open(&dest)
                .map_err(|e| format!("{}: {e}", dest.display()))?;
            io::copy(&mut &source, &mut out).map_err(|e| format!("{}: {e}", dest.display()))?;
            out.set_permissions(fs::Permissions::from_mode(copy_mode))
                .map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        Ok(())
    }

    /// Removes a job directory and everything in it (not following
    /// symlinks). A directory that is already gone is fine.
    pub fn remove_job_dir(&self, job_dir: &Path) -> Result<(), String> {
        remove_job_dir(job_dir)
    }

    /// Bytes in entries now (what eviction compares with the bound).
    pub fn used_bytes(&self) -> Result<u64, String> {
        let mut total: u64 = 0;
        for item in fs::read_dir(&self.inner.dir).map_err(|e| self.err(e))? {
            let item = item.map_err(|e| self.err(e))?;
            let name = item.file_name();
            if name.to_str().is_some_and(|n| validate_hash(n).is_ok()) {
                if let Ok(m) = item.metadata() {
                    total = total.saturating_add(m.len());
                }
            }
        }
        Ok(total)
    }
}

/// See [`Cache::remove_job_dir`].
pub fn remove_job_dir(job_dir: &Path) -> Result<(), String> {
    let shown = job_dir.display();
    match fs::symlink_metadata(job_dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("job dir {shown}: {e}")),
        Ok(m) if !m.is_dir() => {
            return Err(format!("job dir {shown}: not a directory, not removed"))
        }
        Ok(_) => {}
    }
    fs::remove_dir_all(job_dir).map_err(|e| format!("removing job dir {shown}: {e}"))
}

/// One file being received into the cache. Bytes past the announced size
/// are refused as they come; the whole is checked by [`Inserter::finish`].
/// Dropped unfinished, it removes its temp file.
pub struct Inserter {
    cache: Cache,
    hash: String,
    size: u64,
    temp: PathBuf,
    file: Option<io::BufWriter<File>>,
    hasher: Sha256,
    written: u64,
}

impl std::fmt::Debug for Inserter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inserter")
            .field("hash", &self.hash)
            .field("size", &self.size)
            .field("written", &self.written)
            .finish()
    }
}

impl Write for Inserter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.size - self.written;
        if buf.len() as u64 > room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: more than the announced {} bytes", self.hash, self.size),
            ));
        }
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("insert already finished"))?;
        let n = file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Inserter {
    /// Bytes received so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Checks size and sha256 (the bytes came from the network), then
    /// moves the file into the cache atomically, pins it and evicts down to
    /// the bound. On a mismatch the received bytes are deleted.
    pub fn finish(mut self) -> Result<PathBuf, String> {
        let cache = self.cache.clone();
        let Some(writer) = self.file.take() else {
            return Err(cache.err("insert already finished"));
        };
        let file = writer
            .into_inner()
            .map_err(|e| cache.err(format!("{}: {}", self.temp.display(), e.error())))?;
        if self.written != self.size {
            return Err(cache.err(format!(
                "{}: received {} bytes, announced {}",
                self.hash, self.written, self.size
            )));
        }
        let got = to_hex(&std::mem::take(&mut self.hasher).finalize());
        if got != self.hash {
            return Err(cache.err(format!(
                "content does not match its hash: announced {}, received {got}",
                self.hash
            )));
        }
        file.set_permissions(fs::Permissions::from_mode(ENTRY_MODE))
            .map_err(|e| cache.err(format!("{}: {e}", self.temp.display())))?;
        let lock = cache.lock()?;
        let entry = cache.entry_path(&self.hash);
        if entry.exists() {
            // Another gwrun received the same bytes first: keep its entry.
            let _ = fs::remove_file(&self.temp);
        } else {
            fs::rename(&self.temp, &entry)
                .map_err(|e| cache.err(format!("{}: {e}", entry.display())))?;
        }
        // Our exclusive lock on the temp (now the entry) goes before we pin.
        drop(file);
        self.temp = PathBuf::new();
        let path = cache
            .pin_locked(&self.hash)
            .map_err(|e| cache.err(format!("{}: {e}", entry.display())))?;
        cache.evict_locked(Some(&self.hash))?;
        drop(lock);
        Ok(path)
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::hash_reader;
    use crate::stage::test_util::TempDir;
    use std::time::Duration;

    fn hash_of(bytes: &[u8]) -> String {
        hash_reader(bytes).unwrap().0
    }

    fn insert(cache: &Cache, bytes: &[u8]) -> PathBuf {
        let mut ins = cache
            .begin_insert(&hash_of(bytes), bytes.len() as u64)
            .unwrap();
        // In pieces, as from the network.
        for chunk in bytes.chunks(1000) {
            ins.write_all(chunk).unwrap();
        }
        ins.finish().unwrap()
    }

    fn age(path: &Path, secs_ago: u64) {
        let f = File::open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn mode_of(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn default_dir_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            default_dir_from(env(&[("GW_STAGE_CACHE", "/c"), ("HOME", "/h")])).unwrap(),
            Path::new("/c")
        );
        assert_eq!(
            default_dir_from(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap(),
            Path::new("/x/gridwire/stage")
        );
        assert_eq!(
            default_dir_from(env(&[
                ("GW_STAGE_CACHE", ""),
                ("XDG_CACHE_HOME", "rel"),
                ("HOME", "/h")
            ]))
            .unwrap(),
            Path::new("/h/.cache/gridwire/stage")
        );
        assert!(default_dir_from(env(&[]))
            .unwrap_err()
            .contains("GW_STAGE_CACHE"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_max("2147483648").unwrap(), 2 << 30);
        assert_eq!(parse_max(" 512M ").unwrap(), 512 << 20);
        assert_eq!(parse_max("2G").unwrap(), 2 << 30);
        assert_eq!(parse_max("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_max("1t").unwrap(), 1 << 40);
        assert_eq!(parse_max("10k").unwrap(), 10 << 10);
        for bad in [
            "",
            "G",
            "-1",
            "1.5G",
            "2 G",
            "abc",
            "1X",
            "0",
            "99999999999999999999999",
        ] {
            assert!(parse_max(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_max("17179869184T").unwrap_err().contains("too large"));
        assert!(parse_max("x").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn open_makes_a_private_directory() {
        let tmp = TempDir::new("cache-open");
        let dir = tmp.path().join("a/b/stage");
        let cache = Cache::open(Some(dir.clone()), Some(1000)).unwrap();
        assert_eq!(cache.dir(), dir);
        assert_eq!(cache.max(), 1000);
        assert_eq!(mode_of(&dir), 0o700);
        // A too open existing directory is closed.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Cache::open(Some(dir.clone()), Some(1000)).unwrap();
        assert_eq!(mode_of(&dir), 0o700);
        assert!(Cache::open(Some(dir.clone()), Some(0)).is_err());
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(Cache::open(Some(file), Some(1000)).is_err());
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        if !gridwire_testkit::is_root() {
            return gridwire_testkit::skip("needs root to give a directory to another user");
        }
        let tmp = TempDir::new("cache-owner");
        let dir = tmp.path().join("stage");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = Cache::open(Some(dir), Some(1000)).unwrap_err();
        assert!(err.contains("owned by uid 65534"), "{err}");
    }

    #[test]
    fn insert_then_hit() {
        let tmp = TempDir::new("cache-hit");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(1 << 20)).unwrap();
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let hash = hash_of(&bytes);
        assert_eq!(cache.has(&hash), None);
        let path = insert(&cache, &bytes);
        assert_eq!(path, cache.dir().join(&hash));
        assert_eq!(fs::read(&path).unwrap(), bytes);
        assert_eq!(mode_of(&path), ENTRY_MODE);
        assert_eq!(cache.has(&hash), Some(path.clone()));
        assert_eq!(cache.used_bytes().unwrap(), 5000);
        // A second instance (another gwrun) sees it too.
        let other = Cache::open(Some(cache.dir().to_path_buf()), Some(1 << 20)).unwrap();
        assert_eq!(other.has(&hash), Some(path));
        // Inserting what is there already is fine and keeps one entry.
        insert(&other, &bytes);
        assert_eq!(listing(cache.dir()), [".lock".to_string(), hash]);
        // Hostile lookups: not there.
        for bad in ["../../etc/passwd", "", &"A".repeat(64), &"0".repeat(65)] {
            assert_eq!(cache.has(bad), None);
            assert!(cache.begin_insert(bad, 1).is_err());
        }
    }

    #[test]
    fn hostile_content_is_refused_and_removed() {
        let tmp = TempDir::new("cache-bad");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(1 << 20)).unwrap();
        let good = b"the program".to_vec();
        let hash = hash_of(&good);

        let mut ins = cache.begin_insert(&hash, good.len() as u64).unwrap();
        ins.write_all(b"the progrAm").unwrap();
        let err = ins.finish().unwrap_err();
        assert!(err.contains("does not match its hash"), "{err}");

        let mut ins = cache.begin_insert(&hash, good.len() as u64).unwrap();
        ins.write_all(&good[..5]).unwrap();
        let err = ins.finish().unwrap_err();
        assert!(err.contains("received 5 bytes, announced 11"), "{err}");

        let mut ins = cache.begin_insert(&hash, good.len() as u64).unwrap();
        ins.write_all(&good).unwrap();
        let err = ins.write(b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(ins.written(), 11);
        drop(ins);

        let err = cache.begin_insert(&hash, (1 << 20) + 1).unwrap_err();
        assert!(err.contains("does not fit"), "{err}");

        assert_eq!(cache.has(&hash), None);
        assert_eq!(listing(cache.dir()), [".lock"], "temp files left behind");
    }

    #[test]
    fn least_recently_used_goes_first() {
        let tmp = TempDir::new("cache-lru");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(3000)).unwrap();
        let files: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 1000]).collect();
        let paths: Vec<PathBuf> = files[..3].iter().map(|f| insert(&cache, f)).collect();
        cache.unpin_all();
        // Used long ago, in the order 1, 0, 2; then 1 is hit again.
        age(&paths[0], 200);
        age(&paths[1], 300);
        age(&paths[2], 100);
        assert!(cache.has(&hash_of(&files[1])).is_some());
        cache.unpin_all();
        insert(&cache, &files[3]);
        assert!(!paths[0].exists(), "the least recently used stays");
        assert!(paths[1].exists() && paths[2].exists());
        assert_eq!(cache.used_bytes().unwrap(), 3000);
        // A smaller bound at open evicts down to it (never the pinned).
        let small = Cache::open(Some(cache.dir().to_path_buf()), Some(1500)).unwrap();
        assert_eq!(small.used_bytes().unwrap(), 1000);
        assert!(cache.dir().join(hash_of(&files[3])).exists());
    }

    #[test]
    fn pinned_entries_survive_other_gwruns() {
        let tmp = TempDir::new("cache-pin");
        let dir = tmp.path().join("c");
        let ours = Cache::open(Some(dir.clone()), Some(2000)).unwrap();
        let a = vec![1u8; 1000];
        let b = vec![2u8; 1000];
        let pa = insert(&ours, &a);
        age(&pa, 1000); // the oldest, but pinned
        let theirs = Cache::open(Some(dir.clone()), Some(2000)).unwrap();
        let pb = insert(&theirs, &b);
        theirs.unpin_all();
        insert(&theirs, &[3u8; 1000]);
        assert!(pa.exists(), "a pinned entry was evicted");
        assert!(!pb.exists());
        // Unpinned, it goes.
        ours.unpin(&hash_of(&a));
        insert(&theirs, &[4u8; 1000]);
        assert!(!pa.exists());
        // Dropping a cache drops its pins.
        let p5 = insert(&ours, &[5u8; 1000]);
        age(&p5, 1000);
        drop(ours);
        theirs.unpin_all();
        insert(&theirs, &[6u8; 1000]);
        assert!(!p5.exists());
    }

    #[test]
    fn just_inserted_and_linked_entries_are_kept() {
        let tmp = TempDir::new("cache-keep");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(1500)).unwrap();
        let a = vec![1u8; 1000];
        insert(&cache, &a);
        let job = tmp.path().join("job");
        cache
            .materialize(&[("prog", hash_of(&a), 0o755)], &job)
            .unwrap();
        cache.unpin_all();
        // `a` is linked into a running job: kept although over the bound,
        // and the new one is never the victim.
        let pb = insert(&cache, &[2u8; 1000]);
        assert!(pb.exists());
        assert!(cache.dir().join(hash_of(&a)).exists());
        assert_eq!(cache.used_bytes().unwrap(), 2000);
        // The job ends: `a` is evictable again.
        cache.remove_job_dir(&job).unwrap();
        cache.unpin_all();
        age(&pb, 10);
        age(&cache.dir().join(hash_of(&a)), 20);
        insert(&cache, &[3u8; 100]);
        assert!(!cache.dir().join(hash_of(&a)).exists());
        assert!(pb.exists());
    }

    #[test]
    fn materialize_and_remove() {
        let tmp = TempDir::new("cache-mat");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(1 << 20)).unwrap();
        let prog = b"\x7fELF pretend".to_vec();
        let data = b"input".to_vec();
        insert(&cache, &prog);
        insert(&cache, &data);
        let job = tmp.path().join("job");
        let files = vec![
            ("prog".to_string(), hash_of(&prog), 0o755),
            ("libmpi.so".to_string(), hash_of(&prog), 0o755),
            ("input.dat".to_string(), hash_of(&data), 0o644),
        ];
        cache.materialize(&files, &job).unwrap();
        assert_eq!(mode_of(&job), 0o700);
        assert_eq!(fs::read(job.join("prog")).unwrap(), prog);
        assert_eq!(fs::read(job.join("input.dat")).unwrap(), data);
        // Executables are links to the read-only entry, data is a copy.
        let entry = fs::metadata(cache.dir().join(hash_of(&prog))).unwrap();
        assert_eq!(entry.nlink(), 3);
        assert_eq!(fs::metadata(job.join("prog")).unwrap().ino(), entry.ino());
        assert_eq!(mode_of(&job.join("prog")), 0o500);
        assert_eq!(mode_of(&job.join("input.dat")), 0o600);
        assert_eq!(fs::metadata(job.join("input.dat")).unwrap().nlink(), 1);
        // The job cannot write through its link into the cache (root can,
        // so only check the mode there).
        if !gridwire_testkit::is_root() {
            assert!(OpenOptions::new()
                .write(true)
                .open(job.join("prog"))
                .is_err());
        }

        cache.remove_job_dir(&job).unwrap();
        assert!(!job.exists());
        assert_eq!(
            fs::metadata(cache.dir().join(hash_of(&prog)))
                .unwrap()
                .nlink(),
            1
        );
        cache.remove_job_dir(&job).unwrap();

        // A job dir made by the caller is used.
        fs::create_dir(&job).unwrap();
        cache.materialize(&files[2..], &job).unwrap();
        assert_eq!(mode_of(&job), 0o700);
        cache.remove_job_dir(&job).unwrap();
    }

    #[test]
    fn materialize_refuses_bad_input() {
        let tmp = TempDir::new("cache-matbad");
        let cache = Cache::open(Some(tmp.path().join("c")), Some(1 << 20)).unwrap();
        let bytes = b"x".to_vec();
        let h = hash_of(&bytes);
        let h = h.as_str();
        insert(&cache, &bytes);
        let job = tmp.path().join("job");
        let missing = "0".repeat(64);
        let missing = missing.as_str();
        type Files<'a> = Vec<(&'a str, &'a str, u32)>;
        let cases: Vec<(Files, &str)> = vec![
            (vec![("../evil", h, 0o755)], "bad file name"),
            (vec![("..", h, 0o755)], "bad file name"),
            (vec![("a", "../../etc/passwd", 0o755)], "bad content hash"),
            (vec![("a", h, 0o755), ("a", h, 0o644)], "staged twice"),
            (
                vec![("a", h, 0o755), ("b", missing, 0o755)],
                "is not in the cache",
            ),
        ];
        for (files, want) in cases {
            let err = cache.materialize(&files, &job).unwrap_err();
            assert!(err.contains(want), "{files:?}: {err}");
            assert!(!job.exists(), "{files:?}: job dir left behind");
        }
        // Not a directory, and a symlink to one: refused, not followed.
        fs::write(&job, "").unwrap();
        assert!(cache.materialize(&[("a", h, 0o755)], &job).is_err());
        assert!(cache.remove_job_dir(&job).is_err());
        fs::remove_file(&job).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &job).unwrap();
        assert!(cache.materialize(&[("a", h, 0o755)], &job).is_err());
        assert!(cache.remove_job_dir(&job).is_err());
        assert!(elsewhere.exists());
    }

    #[test]
    fn stale_temp_files_are_swept_live_ones_kept() {
        let tmp = TempDir::new("cache-temp");
        let dir = tmp.path().join("c");
        let cache = Cache::open(Some(dir.clone()), Some(1 << 20)).unwrap();
        // A crashed insert's leftover: nobody holds its lock.
        fs::write(dir.join(".tmp-999999-1-0"), "partial").unwrap();
        let bytes = vec![9u8; 10];
        let mut live = cache.begin_insert(&hash_of(&bytes), 10).unwrap();
        live.write_all(&bytes[..4]).unwrap();
        Cache::open(Some(dir.clone()), Some(1 << 20)).unwrap();
        let temps: Vec<String> = listing(&dir)
            .into_iter()
            .filter(|n| n.starts_with(TEMP_PREFIX))
            .collect();
        assert_eq!(temps.len(), 1, "{temps:?}");
        assert_ne!(temps[0], ".tmp-999999-1-0");
        live.write_all(&bytes[4..]).unwrap();
        live.finish().unwrap();
        // Dropping an unfinished insert removes its temp file.
        let unfinished = cache.begin_insert(&"1".repeat(64), 10).unwrap();
        drop(unfinished);
        assert_eq!(listing(&dir), [".lock".to_string(), hash_of(&bytes)]);
    }

    #[test]
    fn concurrent_inserts_of_the_same_file() {
        let tmp = TempDir::new("cache-conc");
        let dir = tmp.path().join("c");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let dir = dir.clone();
                let bytes = bytes.clone();
                std::thread::spawn(move || {
                    let cache = Cache::open(Some(dir), Some(1 << 20)).unwrap();
                    insert(&cache, &bytes)
                })
            })
            .collect();
        let paths: Vec<PathBuf> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(paths.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(fs::read(&paths[0]).unwrap(), bytes);
        assert_eq!(listing(&dir), [".lock".to_string(), hash_of(&bytes)]);
    }
}
