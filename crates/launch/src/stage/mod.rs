//! Executable staging for `gwrun -f` (issue 12): which files a job needs on
//! a host that has nothing but sshd and libc, and a content-addressed cache
//! for them on the receiving side.
//!
//! - [`collect`] (front end): the program, the non-system shared libraries
//!   the dynamic loader would load for it on this machine (gridwire's
//!   `libmpi.so` from a target dir or an install prefix), and the
//!   `--stage-files`, each with its sha256.
//! - [`cache::Cache`] (proxy): the received files by hash, size-bounded,
//!   least recently used evicted, materialized into a job directory.
//! - [`elf`]: whether a staged file can run on the receiving host (machine,
//!   class, glibc version).
//!
//! The staged program finds its libraries through `LD_LIBRARY_PATH=<job
//! dir>` set by whoever starts it: its own RUNPATH names directories of the
//! front end that the host does not have, which the loader skips.

pub mod cache;
mod collect;
pub mod elf;
pub mod hashes;

pub use collect::{collect, collect_with, is_system_path, LoaderEnv};

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// One file to stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageFile {
    /// Its name in the job directory ("prog", "libmpi.so", "input.dat").
    pub name: String,
    /// Where it is on this machine (canonical).
    pub source: PathBuf,
    /// sha256 of the content, 64 lowercase hex digits.
    pub hash: String,
    pub size: u64,
    /// Permission bits (`st_mode & 0o777`).
    pub mode: u32,
    pub is_program: bool,
}

impl StageFile {
    /// What [`cache::Cache::materialize`] takes for this file.
    pub fn entry(&self) -> (String, String, u32) {
        (self.name.clone(), self.hash.clone(), self.mode)
    }
}

/// Longest name of a staged file (NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;

/// A name that can be a file in the job directory: no `/`, no NUL, not
/// `.` or `..`, not empty, at most 255 bytes.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty file name".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "file name of {} bytes (at most {MAX_NAME_LEN})",
            name.len()
        ));
    }
    if name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(format!("bad file name {name:?}"));
    }
    Ok(())
}

/// A sha256 as we write it: exactly 64 lowercase hex digits. Anything else
/// (from the network) never reaches a path.
pub fn validate_hash(hash: &str) -> Result<(), String> {
    if hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        let shown: String = hash.chars().take(80).collect();
        Err(format!(
            "bad content hash {shown:?} (want 64 lowercase hex digits)"
        ))
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// sha256 (hex) and length of everything `reader` yields, read in 64 KiB
/// pieces.
pub fn hash_reader(mut reader: impl Read) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total = total.saturating_add(n as u64);
    }
    Ok((to_hex(&hasher.finalize()), total))
}

/// Describes the regular file at `source` for staging under `name`: its
/// hash is streamed, and a file that changes size while we read it is an
/// error (it would arrive corrupt).
pub fn describe(name: String, source: &Path, is_program: bool) -> Result<StageFile, String> {
    use std::os::unix::fs::PermissionsExt;
    validate_name(&name).map_err(|e| format!("{}: {e}", source.display()))?;
    let file = std::fs::File::open(source).map_err(|e| format!("{}: {e}", source.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", source.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", source.display()));
    }
    let (hash, size) =
        hashes::sha256(&file, &meta, source).map_err(|e| format!("{}: {e}", source.display()))?;
    if size != meta.len() {
        return Err(format!(
            "{}: changed while being read ({} bytes, then {size})",
            source.display(),
            meta.len()
        ));
    }
    Ok(StageFile {
        name,
        source: source.to_path_buf(),
        hash,
        size,
        mode: meta.permissions().mode() & 0o777,
        is_program,
    })
}

#[cfg(test)]
pub(crate) mod test_util {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicU32, Ordering};

    pub fn have_cc() -> bool {
        Command::new("cc")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Compiles `source` (C) into `out` with `args` (libraries, -Wl,…); the
    /// source file goes to `dir`.
    pub fn cc(dir: &Path, source: &str, out: &Path, args: &[&str]) {
        let src = dir.join(format!("{}.c", out.file_name().unwrap().to_string_lossy()));
        std::fs::write(&src, source).unwrap();
        let o = Command::new("cc")
            .arg(&src)
            .arg("-o")
            .arg(out)
            .args(args)
            .output()
            .expect("cc runs");
        assert!(
            o.status.success(),
            "cc {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// A fresh directory under the temp dir, removed on drop.
    pub struct TempDir(pub PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("gw-stage-{}-{tag}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            // Staged files are read-only: make them removable first.
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+rwx"])
                .arg(&self.0)
                .status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in [
            "prog",
            "libmpi.so.12",
            "a",
            "...",
            ".hidden",
            &"x".repeat(255),
        ] {
            validate_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "/", "a\0b", &"x".repeat(256)] {
            assert!(validate_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn hashes() {
        validate_hash(&"0123456789abcdef".repeat(4)).unwrap();
        for bad in [
            "".to_string(),
            "A".repeat(64),
            "0".repeat(63),
            "0".repeat(65),
            format!("../{}", "0".repeat(61)),
            format!("{}g", "0".repeat(63)),
            format!("{}é", "0".repeat(62)),
        ] {
            assert!(validate_hash(&bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn sha256_known_answers() {
        assert_eq!(
            hash_reader(&b""[..]).unwrap(),
            (
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
                0
            )
        );
        assert_eq!(
            hash_reader(&b"abc"[..]).unwrap().0,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Longer than one read: a million 'a's (FIPS 180-2's third vector).
        let million = vec![b'a'; 1_000_000];
        assert_eq!(
            hash_reader(&million[..]).unwrap(),
            (
                "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0".into(),
                1_000_000
            )
        );
    }

    /// The whole path: collect a program with its own libraries, send them
    /// through a cache, materialize a job dir, take the originals away, and
    /// the staged program runs from the job dir alone.
    #[test]
    fn collected_files_run_from_a_job_dir() {
        use std::io::Write;
        if !test_util::have_cc() {
            return gridwire_testkit::skip("no C compiler (cc)");
        }
        let tmp = test_util::TempDir::new("e2e");
        let build = tmp.path().join("build");
        let lib = build.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        let l = lib.to_str().unwrap();
        test_util::cc(
            tmp.path(),
            "int two(void) { return 2; }",
            &lib.join("libtwo.so"),
            &["-shared", "-fPIC"],
        );
        test_util::cc(
            tmp.path(),
            "int two(void); int three(void) { return two() + 1; }",
            &lib.join("libthree.so"),
            &["-shared", "-fPIC", "-L", l, "-ltwo", "-Wl,-rpath,$ORIGIN"],
        );
        let prog = build.join("prog");
        test_util::cc(
            tmp.path(),
            "#include <stdio.h>\nint three(void);\n\
             int main(void) { printf(\"%d\\n\", three()); return three() == 3 ? 0 : 1; }",
            &prog,
            &[
                "-L",
                l,
                "-lthree",
                "-Wl,-rpath,$ORIGIN/lib",
                "-Wl,--allow-shlib-undefined",
            ],
        );
        let input = tmp.path().join("input.dat");
        std::fs::write(&input, "data").unwrap();
        let files = collect(&prog, std::slice::from_ref(&input)).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["prog", "libthree.so", "libtwo.so", "input.dat"]);

        let cache = cache::Cache::open(Some(tmp.path().join("cache")), Some(1 << 30)).unwrap();
        for f in &files {
            if cache.has(&f.hash).is_some() {
                continue;
            }
            let mut ins = cache.begin_insert(&f.hash, f.size).unwrap();
            ins.write_all(&std::fs::read(&f.source).unwrap()).unwrap();
            ins.finish().unwrap();
        }
        let job = tmp.path().join("job");
        let entries: Vec<_> = files.iter().map(StageFile::entry).collect();
        cache.materialize(&entries, &job).unwrap();
        std::fs::rename(&build, tmp.path().join("gone")).unwrap();

        let staged: Vec<PathBuf> = files.iter().map(|f| job.join(&f.name)).collect();
        let staged: Vec<&Path> = staged.iter().map(PathBuf::as_path).collect();
        elf::check_all_run_here(&staged).unwrap();
        let out = std::process::Command::new(job.join("prog"))
            .env("LD_LIBRARY_PATH", &job)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"3\n");
        // Without the job dir on its path the loader finds nothing: the
        // run above used the staged libraries.
        let alone = std::process::Command::new(job.join("prog"))
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert!(!alone.status.success(), "{alone:?}");
        cache.remove_job_dir(&job).unwrap();
        assert!(!job.exists());
    }

    #[test]
    fn describe_a_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = test_util::TempDir::new("describe");
        let p = dir.path().join("data");
        std::fs::write(&p, "abc").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4750)).unwrap();
        let f = describe("data".into(), &p, false).unwrap();
        assert_eq!(f.size, 3);
        assert_eq!(f.mode, 0o750, "setuid bit dropped");
        assert_eq!(
            f.hash,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(describe("data".into(), dir.path(), false)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(describe("a/b".into(), &p, false).is_err());
    }
}
