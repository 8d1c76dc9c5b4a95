//! Remembered sha256 sums of the front end's files (its own binary, the
//! program, `libmpi.so`), so that a start does not read tens of megabytes
//! before its first ssh: a release `libmpi.so` with debug info is ~40 MB,
//! ~0.12 s of hashing on every `gwrun -f`, all of it on the critical path.
//!
//! Like git's index and ccache, a sum is reused while the file's identity
//! and change times are those it was computed for: device, inode, size,
//! mtime and ctime (nanoseconds). ctime cannot be set by a user, so any
//! write to the file or a file renamed over it changes the key. A sum is
//! only remembered for a file unchanged for [`SETTLED`] when it was read:
//! a write within the same clock tick as the read would otherwise keep its
//! old times ("racy git").
//!
//! The entries live in `$GW_HASH_CACHE`, else `$XDG_CACHE_HOME/gridwire/
//! hashes`, else `~/.cache/gridwire/hashes`, one small file per path
//! (named by the sha256 of the path). `GW_HASH_CACHE=0` turns it off.
//! An entry is trusted no more than the user's home: whoever can write it
//! could as well edit the user's shell start-up. A malformed entry is
//! ignored and rewritten; a cache that cannot be written costs only the
//! hashing.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::{hash_reader, to_hex, validate_hash};

/// A file must be this old (last change) for its sum to be remembered.
const SETTLED: Duration = Duration::from_secs(2);
/// An entry is one short line; anything longer is not ours.
const MAX_ENTRY: u64 = 512;

/// sha256 (hex) and length of `file` (open, with `meta` from it) at
/// `path`, from the cache when the file is unchanged.
pub fn sha256(file: &File, meta: &Metadata, path: &Path) -> std::io::Result<(String, u64)> {
    let dir = cache_dir();
    let entry = dir.as_ref().map(|d| d.join(entry_name(path)));
    let key = key_of(meta);
    if let Some(e) = &entry {
        if let Some(hash) = lookup(e, &key) {
            return Ok((hash, meta.len()));
        }
    }
    let (hash, size) = hash_reader(file)?;
    if let (Some(d), Some(e)) = (&dir, &entry) {
        if size == meta.len() && settled(meta) {
            store(d, e, &key, &hash);
        }
    }
    Ok((hash, size))
}

fn cache_dir() -> Option<PathBuf> {
    let get = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = get("GW_HASH_CACHE") {
        return (d != "0").then(|| PathBuf::from(d));
    }
    if let Some(d) = get("XDG_CACHE_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Some(Path::new(&d).join("gridwire/hashes"));
    }
    get("HOME").map(|h| Path::new(&h).join(".cache/gridwire/hashes"))
}

fn entry_name(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    to_hex(&Sha256::digest(path.as_os_str().as_bytes()))
}

/// What must be unchanged for a remembered sum to hold.
fn key_of(m: &Metadata) -> String {
    format!(
        "v1 {} {} {} {}.{} {}.{}",
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
}

fn settled(m: &Metadata) -> bool {
    let changed = |s: i64, ns: i64| {
        let secs = u64::try_from(s).ok()?;
        let nanos = u32::try_from(ns).ok()?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    };
    let (Some(mt), Some(ct)) = (
        changed(m.mtime(), m.mtime_nsec()),
        changed(m.ctime(), m.ctime_nsec()),
    ) else {
        return false;
    };
    let now = SystemTime::now();
    [mt, ct]
        .iter()
        .all(|t| now.duration_since(*t).is_ok_and(|age| age >= SETTLED))
}

/// The remembered sum when the entry matches `key` exactly.
fn lookup(entry: &Path, key: &str) -> Option<String> {
    let mut text = String::new();
    File::open(entry)
        .ok()?
        .take(MAX_ENTRY)
        .read_to_string(&mut text)
        .ok()?;
    let line = text.strip_suffix('\n')?;
    let (k, hash) = line.rsplit_once(' ')?;
    (k == key && validate_hash(hash).is_ok()).then(|| hash.to_string())
}

/// Writes the entry atomically (temporary file, rename); failures are
/// ignored: the cache only saves time.
fn store(dir: &Path, entry: &Path, key: &str, hash: &str) {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .is_err()
    {
        return;
    }
    let tmp = entry.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(format!("{key} {hash}\n").as_bytes()));
    if written.is_err() || std::fs::rename(&tmp, entry).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` with `GW_HASH_CACHE` pointing at a fresh directory. The
    /// variable is process-wide: the tests that use it hold this lock.
    fn with_cache<T>(f: impl FnOnce(&Path) -> T) -> T {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("gw-hashes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::env::set_var("GW_HASH_CACHE", &dir);
        let r = f(&dir);
        std::env::remove_var("GW_HASH_CACHE");
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    fn sum(path: &Path) -> (String, u64) {
        let f = File::open(path).unwrap();
        let m = f.metadata().unwrap();
        sha256(&f, &m, path).unwrap()
    }

    /// A settled file's sum is remembered and reused; a changed file is
    /// hashed again (its ctime changed), and a forged entry for another
    /// key is not believed.
    #[test]
    fn remembered_until_the_file_changes() {
        with_cache(|dir| {
            let src = dir.with_extension("data");
            std::fs::write(&src, b"first content").unwrap();
            let fresh = sum(&src);
            assert_eq!(fresh.1, 13);
            // Too new to remember (written just now).
            assert!(!dir.join(entry_name(&src)).exists());
            // Pretend it settled: write the entry as store() would for
            // its current key, with a wrong sum, and see it used...
            let f = File::open(&src).unwrap();
            let key = key_of(&f.metadata().unwrap());
            let bogus = "0".repeat(64);
            store(dir, &dir.join(entry_name(&src)), &key, &bogus);
            assert_eq!(sum(&src).0, bogus, "a matching entry is used");
            // ...until the file changes: new content, new ctime/size.
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(&src, b"second content!").unwrap();
            let again = sum(&src);
            assert_ne!(again.0, bogus);
            assert_eq!(again.1, 15);
            assert_eq!(again.0, hash_reader(&b"second content!"[..]).unwrap().0);
            // Malformed entries are ignored.
            std::fs::write(dir.join(entry_name(&src)), b"garbage").unwrap();
            assert_eq!(sum(&src), again);
            let _ = std::fs::remove_file(&src);
        });
    }

    /// An old file's sum is written to the cache on first use.
    #[test]
    fn settled_files_are_remembered() {
        with_cache(|dir| {
            // Our own test binary: written by the build, normally more
            // than SETTLED ago (if it was just built, only check that
            // nothing was stored too early).
            let exe = std::env::current_exe().unwrap();
            let f = File::open(&exe).unwrap();
            let m = f.metadata().unwrap();
            let settled_before = settled(&m);
            let (h, n) = sha256(&f, &m, &exe).unwrap();
            assert_eq!(n, m.len());
            assert_eq!(h, hash_reader(File::open(&exe).unwrap()).unwrap().0);
            let entry = dir.join(entry_name(&exe));
            if settled_before {
                assert!(entry.exists(), "a settled file's sum is stored");
                assert_eq!(lookup(&entry, &key_of(&m)), Some(h));
            } else if !settled(&m) {
                assert!(!entry.exists(), "stored while the file was fresh");
            }
        });
    }
}
