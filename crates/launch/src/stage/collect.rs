//! Which files a program needs on a host without gridwire: the program and
//! the shared libraries the dynamic loader would load for it *here* that
//! are not system libraries.
//!
//! We resolve DT_NEEDED ourselves, in glibc's order (ld.so(8)), rather than
//! run `ldd`: ldd executes the program's loader (a hostile or foreign binary
//! runs code), its output is text to be parsed, and it cannot tell us under
//! which name a library was asked for. For a name without `/`:
//!
//! 1. DT_RPATH of the object asking, then of the object that loaded it, up
//!    to the program (each only if that object has no DT_RUNPATH; the whole
//!    step only if the one asking has none);
//! 2. `LD_LIBRARY_PATH`;
//! 3. DT_RUNPATH of the object asking;
//! 4. `/etc/ld.so.cache`;
//! 5. the default directories.
//!
//! A candidate of the wrong class or machine is skipped as the loader does,
//! a name already loaded (as asked or by SONAME) is not searched again.
//! `$ORIGIN` is expanded; a path entry with `$LIB` or `$PLATFORM` is
//! skipped (neither is used by gridwire's builds). Only libraries that are
//! not system libraries are followed further: what a system library needs
//! is a system library.

use super::elf::{self, Arch, ElfInfo};
use super::{describe, StageFile};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// More objects than any program loads: a bound on hostile dependency webs.
const MAX_OBJECTS: usize = 4096;
/// ld.so.cache is ~100 KiB on a full desktop.
const MAX_LD_CACHE: u64 = 64 << 20;

/// Directories whose libraries every host has (with libc itself). Paths are
/// compared canonical, so /lib → /usr/lib on merged-/usr systems is fine.
const SYSTEM_DIRS: &[&str] = &[
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
];

/// True for a library a host without gridwire has anyway (see SYSTEM_DIRS).
/// Note: a gridwire installed with PREFIX=/usr counts as system.
pub fn is_system_path(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| path.starts_with(d))
}

/// What the loader's search depends on besides the files themselves.
#[derive(Clone, Debug)]
pub struct LoaderEnv {
    pub ld_library_path: Option<OsString>,
    pub ld_so_cache: PathBuf,
    pub default_dirs: Vec<PathBuf>,
    /// Relative search path entries are relative to this.
    pub cwd: PathBuf,
}

impl LoaderEnv {
    /// This process's: `LD_LIBRARY_PATH`, /etc/ld.so.cache, the multiarch
    /// and plain lib directories.
    pub fn from_process() -> LoaderEnv {
        let triplet = multiarch_triplet();
        let lib = if cfg!(target_pointer_width = "64") {
            "lib64"
        } else {
            "lib"
        };
        let mut default_dirs = Vec::new();
        if let Some(t) = triplet {
            default_dirs.push(PathBuf::from(format!("/lib/{t}")));
            default_dirs.push(PathBuf::from(format!("/usr/lib/{t}")));
        }
        default_dirs.push(PathBuf::from(format!("/{lib}")));
        default_dirs.push(PathBuf::from(format!("/usr/{lib}")));
        if lib != "lib" {
            default_dirs.push(PathBuf::from("/lib"));
            default_dirs.push(PathBuf::from("/usr/lib"));
        }
        LoaderEnv {
            ld_library_path: std::env::var_os("LD_LIBRARY_PATH"),
            ld_so_cache: PathBuf::from("/etc/ld.so.cache"),
            default_dirs,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }
}

fn multiarch_triplet() -> Option<&'static str> {
    if cfg!(all(target_arch = "x86_64", target_env = "gnu")) {
        Some("x86_64-linux-gnu")
    } else if cfg!(all(target_arch = "aarch64", target_env = "gnu")) {
        Some("aarch64-linux-gnu")
    } else if cfg!(all(target_arch = "x86", target_env = "gnu")) {
        Some("i386-linux-gnu")
    } else if cfg!(all(target_arch = "riscv64", target_env = "gnu")) {
        Some("riscv64-linux-gnu")
    } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
        Some("powerpc64le-linux-gnu")
    } else if cfg!(target_arch = "s390x") {
        Some("s390x-linux-gnu")
    } else {
        None
    }
}

/// The files to stage for `program` plus `extra` (`--stage-files`), as the
/// loader of this process would resolve them.
pub fn collect(program: &Path, extra: &[PathBuf]) -> Result<Vec<StageFile>, String> {
    collect_with(program, extra, &LoaderEnv::from_process())
}

/// [`collect`] with an explicit loader environment (tests).
pub fn collect_with(
    program: &Path,
    extra: &[PathBuf],
    env: &LoaderEnv,
) -> Result<Vec<StageFile>, String> {
    let canonical = program
        .canonicalize()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let name = file_name(program)?;
    let mut files = vec![describe(name, &canonical, true)?];

    if elf::is_elf(&canonical)? {
        let info = elf::read_info(&canonical)?;
        let mut resolver = Resolver::new(env, &canonical, info)?;
        resolver.run()?;
        for (name, path) in resolver.staged {
            files.push(describe(name, &path, false)?);
        }
    }

    for path in extra {
        let canonical = path
            .canonicalize()
            .map_err(|e| format!("--stage-files {}: {e}", path.display()))?;
        let name = file_name(path)?;
        files.push(describe(name, &canonical, false).map_err(|e| format!("--stage-files: {e}"))?);
    }
    dedupe(files)
}

fn file_name(path: &Path) -> Result<String, String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: has no file name", path.display()))?;
    name.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{}: file name is not UTF-8", path.display()))
}

/// One name, one content: the same file (or the same bytes) twice is kept
/// once; two different files under one name is an error.
fn dedupe(files: Vec<StageFile>) -> Result<Vec<StageFile>, String> {
    let mut out: Vec<StageFile> = Vec::with_capacity(files.len());
    for f in files {
        match out.iter().find(|o| o.name == f.name) {
            Some(o) if o.hash == f.hash => {}
            Some(o) => {
                return Err(format!(
                    "two different files would be staged as {:?}: {} and {}",
                    f.name,
                    o.source.display(),
                    f.source.display()
                ))
            }
            None => out.push(f),
        }
    }
    Ok(out)
}

struct Object {
    /// Where the loader found it (its `$ORIGIN` is this path's directory).
    path: PathBuf,
    canonical: PathBuf,
    /// The object that first needed it (None: the program).
    loader: Option<usize>,
    info: ElfInfo,
    /// Names it is known by: the names it was asked for, and its SONAME.
    names: Vec<String>,
}

struct Resolver<'a> {
    env: &'a LoaderEnv,
    arch: Arch,
    objects: Vec<Object>,
    ld_cache: Option<HashMap<Vec<u8>, Vec<PathBuf>>>,
    /// (name in the job dir, canonical path), in the order found.
    staged: Vec<(String, PathBuf)>,
}

impl<'a> Resolver<'a> {
    fn new(env: &'a LoaderEnv, program: &Path, info: ElfInfo) -> Result<Self, String> {
        let arch = info
            .arch
            .ok_or_else(|| format!("{}: no ELF header", program.display()))?;
        Ok(Resolver {
            env,
            arch,
            objects: vec![Object {
                path: program.to_path_buf(),
                canonical: program.to_path_buf(),
                loader: None,
                names: info.soname.iter().cloned().collect(),
                info,
            }],
            ld_cache: None,
            staged: Vec::new(),
        })
    }

    /// Breadth first, as the loader orders its search list.
    fn run(&mut self) -> Result<(), String> {
        let mut next = 0;
        while next < self.objects.len() {
            let needed = self.objects[next].info.needed.clone();
            for name in needed {
                self.need(next, &name)?;
            }
            next += 1;
        }
        Ok(())
    }

    fn need(&mut self, requester: usize, name: &str) -> Result<(), String> {
        let found = if let Some(i) = self.loaded(name) {
            i
        } else {
            let path = self.search(requester, name)?.ok_or_else(|| {
                format!(
                    "{}: needs {name}, which the dynamic loader would not find here \
                     (set LD_LIBRARY_PATH or stage it with --stage-files)",
                    self.objects[requester].path.display()
                )
            })?;
            let canonical = path
                .canonicalize()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some(i) = self.objects.iter().position(|o| o.canonical == canonical) {
                // The same file under another name (a symlink).
                i
            } else {
                if self.objects.len() >= MAX_OBJECTS {
                    return Err(format!(
                        "{}: more than {MAX_OBJECTS} shared libraries",
                        self.objects[0].path.display()
                    ));
                }
                // System libraries are not read: they are not staged and
                // neither is anything they need.
                let info = if is_system_path(&canonical) {
                    ElfInfo::default()
                } else {
                    elf::read_info(&canonical)?
                };
                self.objects.push(Object {
                    path,
                    canonical,
                    loader: Some(requester),
                    names: info.soname.iter().cloned().collect(),
                    info,
                });
                self.objects.len() - 1
            }
        };
        let object = &mut self.objects[found];
        if !object.names.iter().any(|n| n == name) {
            object.names.push(name.to_string());
        }
        if found != 0 && !is_system_path(&object.canonical) {
            let stage_name = Path::new(name)
                .file_name()
                .and_then(OsStr::to_str)
                .unwrap_or(name)
                .to_string();
            let entry = (stage_name, object.canonical.clone());
            if !self.staged.contains(&entry) {
                self.staged.push(entry);
            }
        }
        Ok(())
    }

    fn loaded(&self, name: &str) -> Option<usize> {
        self.objects
            .iter()
            .position(|o| o.names.iter().any(|n| n == name))
    }

    fn search(&mut self, requester: usize, name: &str) -> Result<Option<PathBuf>, String> {
        if name.contains('/') {
            let p = self.env.cwd.join(name);
            return Ok(self.usable(&p).then_some(p));
        }
        let asking = &self.objects[requester];
        if asking.info.runpath.is_none() {
            let mut at = Some(requester);
            let mut steps = 0;
            while let Some(i) = at {
                let o = &self.objects[i];
                if o.info.runpath.is_none() {
                    if let Some(rpath) = &o.info.rpath {
                        if let Some(p) = self.in_path_list(rpath, &o.path, name) {
                            return Ok(Some(p));
                        }
                    }
                }
                at = o.loader;
                steps += 1;
                if steps > MAX_OBJECTS {
                    break;
                }
            }
        }
        if let Some(list) = &self.env.ld_library_path {
            // The loader also splits LD_LIBRARY_PATH at ';'.
            let list: Vec<u8> = list
                .as_bytes()
                .iter()
                .map(|&b| if b == b';' { b':' } else { b })
                .collect();
            if let Some(p) = self.in_path_list(&OsString::from_vec(list), &self.env.cwd, name) {
                return Ok(Some(p));
            }
        }
        let asking = &self.objects[requester];
        if let Some(runpath) = &asking.info.runpath {
            if let Some(p) = self.in_path_list(runpath, &asking.path, name) {
                return Ok(Some(p));
            }
        }
        for p in self.ld_cache_lookup(name) {
            if self.usable(&p) {
                return Ok(Some(p));
            }
        }
        for dir in &self.env.default_dirs {
            let p = dir.join(name);
            if self.usable(&p) {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// The first directory of a `:`-separated list holding a usable `name`.
    /// `origin_of` is the object whose directory `$ORIGIN` means (for
    /// LD_LIBRARY_PATH: none; `$ORIGIN` there is left unexpanded and so
    /// matches nothing, as for a set-user-ID program).
    fn in_path_list(&self, list: &OsStr, origin_of: &Path, name: &str) -> Option<PathBuf> {
        let origin = origin_of.parent().unwrap_or(Path::new("/"));
        for entry in list.as_bytes().split(|&b| b == b':') {
            let Some(dir) = expand(entry, origin) else {
                continue;
            };
            let dir = if dir.as_os_str().is_empty() {
                self.env.cwd.clone()
            } else {
                self.env.cwd.join(dir)
            };
            let p = dir.join(name);
            if self.usable(&p) {
                return Some(p);
            }
        }
        None
    }

    /// The loader takes a candidate that opens and is an ELF object of our
    /// class and machine; anything else is skipped.
    fn usable(&self, path: &Path) -> bool {
        path.is_file() && elf::read_arch(path).is_ok_and(|a| a == self.arch)
    }

    fn ld_cache_lookup(&mut self, name: &str) -> Vec<PathBuf> {
        if self.ld_cache.is_none() {
            let map = read_bounded(&self.env.ld_so_cache, MAX_LD_CACHE)
                .map(|bytes| parse_ld_so_cache(&bytes))
                .unwrap_or_default();
            self.ld_cache = Some(map);
        }
        self.ld_cache
            .as_ref()
            .and_then(|m| m.get(name.as_bytes()))
            .cloned()
            .unwrap_or_default()
    }
}

/// `$ORIGIN`/`${ORIGIN}` → `origin`; None for an entry naming `$LIB` or
/// `$PLATFORM` or any other `$` token (skipped).
fn expand(entry: &[u8], origin: &Path) -> Option<PathBuf> {
    let mut out: Vec<u8> = Vec::with_capacity(entry.len());
    let mut i = 0;
    while i < entry.len() {
        if entry[i] == b'$' {
            let rest = &entry[i + 1..];
            let token_len = if rest.starts_with(b"{ORIGIN}") {
                8
            } else if rest.starts_with(b"ORIGIN")
                && !rest
                    .get(6)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                6
            } else {
                return None;
            };
            out.extend_from_slice(origin.as_os_str().as_bytes());
            i += 1 + token_len;
        } else {
            out.push(entry[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!("{}: larger than {max} bytes", path.display()));
    }
    Ok(bytes)
}

/// Name → paths, in the cache's order, from glibc's ld.so.cache: the
/// "glibc-ld.so.cache1.1" format, alone or after the old "ld.so-1.7.0"
/// table (ldconfig's compat layout). Anything malformed yields what was
/// read before it (the search then falls back to the default directories).
pub(crate) fn parse_ld_so_cache(bytes: &[u8]) -> HashMap<Vec<u8>, Vec<PathBuf>> {
    const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
    const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    const NEW_HEADER: usize = 48;
    const NEW_ENTRY: usize = 24;
    let mut map: HashMap<Vec<u8>, Vec<PathBuf>> = HashMap::new();
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        let s = b.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    };
    let mut start = 0usize;
    if bytes.starts_with(OLD_MAGIC) {
        // struct cache_file { char magic[11]; uint32 nlibs; file_entry[nlibs] }
        // (12-byte entries), then the new table, 8-aligned.
        let Some(nlibs) = u32_at(bytes, 12) else {
            return map;
        };
        let Some(end) = (nlibs as usize)
            .checked_mul(12)
            .and_then(|n| n.checked_add(16))
        else {
            return map;
        };
        start = match end.checked_add(7) {
            Some(e) => e & !7,
            None => return map,
        };
    }
    let Some(table) = bytes.get(start..) else {
        return map;
    };
    if !table.starts_with(NEW_MAGIC) {
        return map;
    }
    let Some(nlibs) = u32_at(table, 20) else {
        return map;
    };
    let string_at = |offset: u32| -> Option<&[u8]> {
        let s = table.get(offset as usize..)?;
        let end = s.iter().position(|&b| b == 0)?;
        Some(&s[..end])
    };
    for i in 0..nlibs as usize {
        let Some(at) = i
            .checked_mul(NEW_ENTRY)
            .and_then(|n| n.checked_add(NEW_HEADER))
        else {
            break;
        };
        let (Some(key), Some(value)) = (u32_at(table, at + 4), u32_at(table, at + 8)) else {
            break;
        };
        let (Some(key), Some(value)) = (string_at(key), string_at(value)) else {
            continue;
        };
        map.entry(key.to_vec())
            .or_default()
            .push(PathBuf::from(OsStr::from_bytes(value)));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::hash_reader;
    use crate::stage::test_util::{cc, have_cc, TempDir};
    use gridwire_testkit::skip;
    use std::process::Command;

    /// An environment without LD_LIBRARY_PATH (the test process may have one).
    fn clean_env() -> LoaderEnv {
        LoaderEnv {
            ld_library_path: None,
            ..LoaderEnv::from_process()
        }
    }

    fn names(files: &[StageFile]) -> Vec<&str> {
        files.iter().map(|f| f.name.as_str()).collect()
    }

    fn source_of<'a>(files: &'a [StageFile], name: &str) -> &'a Path {
        &files
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} not staged: {files:?}"))
            .source
    }

    /// libbar.so; libfoo.so (needs libbar, `foo_flags` when linking it);
    /// prog (needs libfoo, `prog_flags`). Returns the dir.
    fn build_chain(tag: &str, foo_flags: &[&str], prog_flags: &[&str]) -> TempDir {
        let dir = TempDir::new(tag);
        let lib = dir.path().join("lib");
        std::fs::create_dir(&lib).unwrap();
        let l = lib.to_str().unwrap();
        cc(
            dir.path(),
            "int bar(void) { return 7; }",
            &lib.join("libbar.so"),
            &["-shared", "-fPIC"],
        );
        let mut args = vec!["-shared", "-fPIC", "-L", l, "-lbar"];
        args.extend_from_slice(foo_flags);
        cc(
            dir.path(),
            "int bar(void); int foo(void) { return bar() + 1; }",
            &lib.join("libfoo.so"),
            &args,
        );
        let mut args = vec!["-L", l, "-lfoo", "-Wl,--allow-shlib-undefined"];
        args.extend_from_slice(prog_flags);
        cc(
            dir.path(),
            "int foo(void); int main(void) { return foo() == 8 ? 0 : 1; }",
            &dir.path().join("prog"),
            &args,
        );
        dir
    }

    #[test]
    fn system_program_stages_only_itself() {
        let files = collect(Path::new("/bin/ls"), &[]).unwrap();
        assert_eq!(names(&files), ["ls"]);
        let f = &files[0];
        assert!(f.is_program);
        assert_eq!(f.source, Path::new("/bin/ls").canonicalize().unwrap());
        let (hash, size) = hash_reader(std::fs::File::open("/bin/ls").unwrap()).unwrap();
        assert_eq!((f.hash.as_str(), f.size), (hash.as_str(), size));
        assert_eq!(f.mode & 0o111, 0o111);
    }

    #[test]
    fn scripts_are_staged_alone() {
        let dir = TempDir::new("script");
        let p = dir.path().join("run.sh");
        std::fs::write(&p, "#!/bin/sh\nexec ./prog\n").unwrap();
        let files = collect(&p, &[]).unwrap();
        assert_eq!(names(&files), ["run.sh"]);
    }

    /// A C program linked the way gwcc links it (-L and RUNPATH to the
    /// target dir's libmpi.so) stages libmpi.so, found where ldd finds it.
    #[test]
    fn gridwire_c_program_stages_libmpi() {
        if !have_cc() {
            return skip("no C compiler (cc)");
        }
        // target/<profile>/deps/<this test> → target/<profile>/libmpi.so
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().and_then(Path::parent).unwrap();
        let libmpi = profile.join("libmpi.so");
        if !libmpi.exists() {
            return skip(&format!(
                "{} not built (cargo build -p gridwire-capi)",
                libmpi.display()
            ));
        }
        let dir = TempDir::new("mpi");
        let prog = dir.path().join("hello");
        let libdir = profile.to_str().unwrap();
        cc(
            dir.path(),
            "int MPI_Init(int *, char ***); int MPI_Finalize(void);\n\
             int main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }",
            &prog,
            &["-L", libdir, &format!("-Wl,-rpath,{libdir}"), "-lmpi"],
        );
        let files = collect_with(&prog, &[], &clean_env()).unwrap();
        assert_eq!(names(&files), ["hello", "libmpi.so"]);
        assert_eq!(
            source_of(&files, "libmpi.so"),
            libmpi.canonicalize().unwrap()
        );
        assert!(files[0].is_program && !files[1].is_program);

        // ldd (the real loader) agrees on the non-system libraries.
        let out = Command::new("ldd")
            .arg(&prog)
            .env_remove("LD_LIBRARY_PATH")
            .output();
        let Ok(out) = out else {
            return skip("no ldd to compare with");
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut from_ldd: Vec<(String, PathBuf)> = text
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.trim().split_once(" => ")?;
                let path = rest.split(" (").next()?;
                Some((name.to_string(), Path::new(path).canonicalize().ok()?))
            })
            .filter(|(_, p)| !is_system_path(p))
            .collect();
        from_ldd.sort();
        let mut ours: Vec<(String, PathBuf)> = files[1..]
            .iter()
            .map(|f| (f.name.clone(), f.source.clone()))
            .collect();
        ours.sort();
        assert_eq!(ours, from_ldd, "ldd said:\n{text}");
    }

    #[test]
    fn runpath_origin_recursive() {
        if !have_cc() {
            return skip("no C compiler (cc)");
        }
        let dir = build_chain(
            "runpath",
            &["-Wl,--enable-new-dtags,-rpath,$ORIGIN"],
            &["-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib"],
        );
        let files = collect_with(&dir.path().join("prog"), &[], &clean_env()).unwrap();
        assert_eq!(names(&files), ["prog", "libfoo.so", "libbar.so"]);
        let lib = dir.path().join("lib").canonicalize().unwrap();
        assert_eq!(source_of(&files, "libbar.so"), lib.join("libbar.so"));
        for f in &files {
            let (hash, size) = hash_reader(std::fs::File::open(&f.source).unwrap()).unwrap();
            assert_eq!((&f.hash, f.size), (&hash, size), "{}", f.name);
        }
        // The program runs, so the loader resolved the same files.
        let st = Command::new(dir.path().join("prog"))
            .env_remove("LD_LIBRARY_PATH")
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// DT_RPATH of the program serves its libraries' needs too; DT_RUNPATH
    /// does not (the loader's rule, which ldd shows as "not found").
    #[test]
    fn rpath_is_inherited_runpath_is_not() {
        if !have_cc() {
            return skip("no C compiler (cc)");
        }
        let dir = build_chain(
            "rpath",
            &[],
            &["-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib"],
        );
        let files = collect_with(&dir.path().join("prog"), &[], &clean_env()).unwrap();
        assert_eq!(names(&files), ["prog", "libfoo.so", "libbar.so"]);

        let dir = build_chain(
            "runpath2",
            &[],
            &["-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib"],
        );
        let err = collect_with(&dir.path().join("prog"), &[], &clean_env()).unwrap_err();
        assert!(
            err.contains("libfoo.so: needs libbar.so, which the dynamic loader would not find"),
            "{err}"
        );
    }

    #[test]
    fn ld_library_path_and_its_place_in_the_order() {
        if !have_cc() {
            return skip("no C compiler (cc)");
        }
        let dir = build_chain("ldpath", &[], &[]);
        let prog = dir.path().join("prog");
        let err = collect_with(&prog, &[], &clean_env()).unwrap_err();
        assert!(err.contains("needs libfoo.so"), "{err}");

        let lib = dir.path().join("lib");
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        // A same-named non-ELF file and one that is no library of ours
        // come first: the loader skips both.
        std::fs::write(other.join("libbar.so"), "not an ELF file").unwrap();
        let mut env = clean_env();
        let mut list = other.clone().into_os_string();
        list.push(";");
        list.push(&lib);
        env.ld_library_path = Some(list);
        let files = collect_with(&prog, &[], &env).unwrap();
        assert_eq!(names(&files), ["prog", "libfoo.so", "libbar.so"]);
        assert_eq!(
            source_of(&files, "libbar.so"),
            lib.canonicalize().unwrap().join("libbar.so")
        );

        // RUNPATH comes after LD_LIBRARY_PATH, RPATH before it.
        let copy = dir.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        for l in ["libfoo.so", "libbar.so"] {
            std::fs::copy(lib.join(l), copy.join(l)).unwrap();
        }
        let copy_c = copy.canonicalize().unwrap();
        let lib_c = lib.canonicalize().unwrap();
        let l = lib.to_str().unwrap();
        let c = copy.to_str().unwrap();
        let mut env = clean_env();
        env.ld_library_path = Some(copy.clone().into_os_string());
        for (flags, want) in [
            (format!("-Wl,--enable-new-dtags,-rpath,{l}"), &copy_c),
            (format!("-Wl,--disable-new-dtags,-rpath,{l}"), &lib_c),
        ] {
            cc(
                dir.path(),
                "int foo(void); int main(void) { return foo(); }",
                &prog,
                &["-L", c, "-lfoo", "-Wl,--allow-shlib-undefined", &flags],
            );
            let files = collect_with(&prog, &[], &env).unwrap();
            assert_eq!(
                source_of(&files, "libfoo.so"),
                want.join("libfoo.so"),
                "{flags}"
            );
        }
    }

    /// A library asked for by SONAME through a symlink: staged under that
    /// name, read from the real file.
    #[test]
    fn soname_symlinks() {
        if !have_cc() {
            return skip("no C compiler (cc)");
        }
        let dir = TempDir::new("soname");
        let lib = dir.path().join("lib");
        std::fs::create_dir(&lib).unwrap();
        cc(
            dir.path(),
            "int baz(void) { return 0; }",
            &lib.join("libbaz.so.1.2.3"),
            &["-shared", "-fPIC", "-Wl,-soname,libbaz.so.1"],
        );
        std::os::unix::fs::symlink("libbaz.so.1.2.3", lib.join("libbaz.so.1")).unwrap();
        std::os::unix::fs::symlink("libbaz.so.1", lib.join("libbaz.so")).unwrap();
        let prog = dir.path().join("prog");
        let l = lib.to_str().unwrap();
        cc(
            dir.path(),
            "int baz(void); int main(void) { return baz(); }",
            &prog,
            &["-L", l, "-lbaz", &format!("-Wl,-rpath,{l}")],
        );
        let files = collect_with(&prog, &[], &clean_env()).unwrap();
        assert_eq!(names(&files), ["prog", "libbaz.so.1"]);
        assert_eq!(
            source_of(&files, "libbaz.so.1"),
            lib.canonicalize().unwrap().join("libbaz.so.1.2.3")
        );
    }

    #[test]
    fn extra_files() {
        let dir = TempDir::new("extra");
        let a = dir.path().join("input.dat");
        std::fs::write(&a, "abc").unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let same_name = sub.join("input.dat");
        let ls = PathBuf::from("/bin/ls");

        let files = collect(&ls, &[a.clone(), a.clone()]).unwrap();
        assert_eq!(names(&files), ["ls", "input.dat"]);
        assert_eq!(
            files[1].hash,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!files[1].is_program);

        // The same bytes under the same name from elsewhere: one file.
        std::fs::write(&same_name, "abc").unwrap();
        assert_eq!(
            collect(&ls, &[a.clone(), same_name.clone()]).unwrap().len(),
            2
        );
        // Different bytes under the same name: an error naming both.
        std::fs::write(&same_name, "abd").unwrap();
        let err = collect(&ls, &[a.clone(), same_name.clone()]).unwrap_err();
        assert!(err.contains("\"input.dat\""), "{err}");
        assert!(
            err.contains(&same_name.canonicalize().unwrap().display().to_string()),
            "{err}"
        );
        // A file named like the program.
        let fake_ls = sub.join("ls");
        std::fs::write(&fake_ls, "x").unwrap();
        assert!(collect(&ls, &[fake_ls]).is_err());

        let err = collect(&ls, std::slice::from_ref(&sub)).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let err = collect(&ls, &[dir.path().join("missing")]).unwrap_err();
        assert!(
            err.contains("--stage-files") && err.contains("missing"),
            "{err}"
        );
        assert!(collect(&dir.path().join("no-such-prog"), &[]).is_err());
    }

    #[test]
    fn origin_expansion() {
        let o = Path::new("/opt/app/bin");
        assert_eq!(
            expand(b"$ORIGIN/../lib", o).unwrap(),
            Path::new("/opt/app/bin/../lib")
        );
        assert_eq!(expand(b"${ORIGIN}", o).unwrap(), o);
        assert_eq!(
            expand(b"/usr/local/lib", o).unwrap(),
            Path::new("/usr/local/lib")
        );
        assert!(expand(b"$ORIGINAL", o).is_none());
        assert!(expand(b"/x/$LIB", o).is_none());
        assert!(expand(b"$", o).is_none());
        assert!(expand(b"${ORIGIN", o).is_none());
    }

    #[test]
    fn system_paths() {
        assert!(is_system_path(Path::new(
            "/usr/lib/x86_64-linux-gnu/libc.so.6"
        )));
        assert!(is_system_path(Path::new("/lib64/ld-linux-x86-64.so.2")));
        assert!(!is_system_path(Path::new("/usr/local/lib/libmpi.so")));
        assert!(!is_system_path(Path::new("/usr/libexec/x")));
        assert!(!is_system_path(Path::new(
            "/home/u/gridwire/target/debug/libmpi.so"
        )));
    }

    fn new_cache(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut strings: Vec<u8> = Vec::new();
        let header = 48 + 24 * entries.len();
        let mut table = Vec::new();
        for (k, v) in entries {
            let ko = (header + strings.len()) as u32;
            strings.extend_from_slice(k.as_bytes());
            strings.push(0);
            let vo = (header + strings.len()) as u32;
            strings.extend_from_slice(v.as_bytes());
            strings.push(0);
            table.extend_from_slice(&0x303i32.to_ne_bytes());
            table.extend_from_slice(&ko.to_ne_bytes());
            table.extend_from_slice(&vo.to_ne_bytes());
            table.extend_from_slice(&0u32.to_ne_bytes());
            table.extend_from_slice(&0u64.to_ne_bytes());
        }
        let mut b = b"glibc-ld.so.cache1.1".to_vec();
        b.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        b.extend_from_slice(&[0u8; 4]);
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[0u8; 12]);
        assert_eq!(b.len(), 48);
        b.extend_from_slice(&table);
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn ld_so_cache_format() {
        let bytes = new_cache(&[
            ("libx.so.1", "/opt/x/lib/libx.so.1"),
            ("libx.so.1", "/opt/x/lib32/libx.so.1"),
            ("liby.so", "/opt/y/liby.so"),
        ]);
        let map = parse_ld_so_cache(&bytes);
        assert_eq!(
            map[&b"libx.so.1".to_vec()],
            [
                Path::new("/opt/x/lib/libx.so.1"),
                Path::new("/opt/x/lib32/libx.so.1")
            ]
        );
        assert_eq!(map[&b"liby.so".to_vec()], [Path::new("/opt/y/liby.so")]);

        // Behind the old table (ldconfig -c compat): 8-aligned after it.
        let mut compat = b"ld.so-1.7.0\0".to_vec();
        compat.extend_from_slice(&1u32.to_ne_bytes());
        compat.extend_from_slice(&[0u8; 12]);
        compat.extend_from_slice(&[0u8; 4]); // 28 → 32
        compat.extend_from_slice(&bytes);
        assert_eq!(parse_ld_so_cache(&compat), map);

        // Every truncation and a lying count: no panic, partial at most.
        for len in 0..bytes.len() {
            assert!(parse_ld_so_cache(&bytes[..len]).len() <= 2);
        }
        let mut lying = bytes.clone();
        lying[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse_ld_so_cache(&lying).len(), 2);
        let mut lying = compat.clone();
        lying[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse_ld_so_cache(&lying).is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Mutated caches: no panic, never more names than entries.
        #[test]
        fn mutated_ld_so_cache_never_panics(
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
                1..16,
            ),
        ) {
            let mut bytes = new_cache(&[("liba.so", "/a/liba.so"), ("libb.so.2", "/b/libb.so.2")]);
            for (at, byte) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *byte;
            }
            proptest::prop_assert!(parse_ld_so_cache(&bytes).len() <= 2);
        }
    }

    /// The machine's own cache agrees with `ldconfig -p`.
    #[test]
    fn ld_so_cache_of_this_machine() {
        let Ok(bytes) = read_bounded(Path::new("/etc/ld.so.cache"), MAX_LD_CACHE) else {
            return skip("no /etc/ld.so.cache");
        };
        let map = parse_ld_so_cache(&bytes);
        let libc = map
            .get(b"libc.so.6".as_slice())
            .expect("libc.so.6 in the cache");
        assert!(libc.iter().any(|p| p.exists()), "{libc:?}");
        let Ok(out) = Command::new("ldconfig").arg("-p").output() else {
            return skip("no ldconfig to compare with");
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut checked = 0;
        for line in text.lines().skip(1) {
            let Some((left, path)) = line.trim().split_once(" => ") else {
                continue;
            };
            let name = left.split(" (").next().unwrap();
            let paths = map
                .get(name.as_bytes())
                .unwrap_or_else(|| panic!("{name} missing"));
            assert!(
                paths.iter().any(|p| p == Path::new(path)),
                "{name}: {path} vs {paths:?}"
            );
            checked += 1;
        }
        assert!(checked > 0, "ldconfig -p listed nothing:\n{text}");
    }
}
