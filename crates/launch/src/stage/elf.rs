//! What an ELF file needs from the host that runs it: its machine and
//! class, its shared libraries (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME)
//! and the newest glibc symbol version it was linked against (the
//! `GLIBC_x.y` names of its `SHT_GNU_verneed` table).
//!
//! A staged file arrives from the network and a local one may be corrupt:
//! everything here is read through `object`'s bounds-checked reader, every
//! count we iterate is capped, and a bad file is an error naming it, never a
//! panic. Files are read on demand (`ReadCache`), not whole: a program of a
//! few GiB costs only the headers and tables we look at.

use object::elf;
use object::read::elf::{Dyn as _, FileHeader, SectionHeader as _};
use object::read::{ReadCache, ReadRef};
use object::{Endianness, FileKind};
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// More DT_NEEDED entries than any real object has (glibc programs have a
/// handful, big applications a few hundred).
const MAX_NEEDED: usize = 4096;
/// Version records (verneed and its auxiliaries) we look at before giving
/// up: a corrupt table can chain the same record ~65535 times per entry.
const MAX_VERSION_RECORDS: usize = 1 << 16;
/// Dynamic entries we look at (a real object has well under a hundred).
const MAX_DYNAMIC_ENTRIES: usize = 1 << 16;
/// Largest dynamic or version-needs section we read (a real one: KiBs).
const MAX_TABLE_BYTES: u64 = 4 << 20;

/// What kind of machine an ELF file runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    pub class64: bool,
    pub little_endian: bool,
    /// `e_machine` (EM_X86_64 = 62, EM_AARCH64 = 183, …).
    pub machine: u16,
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.machine {
            3 => "i386".to_string(),
            8 => "mips".to_string(),
            20 => "powerpc".to_string(),
            21 => "powerpc64".to_string(),
            22 => "s390".to_string(),
            40 => "arm".to_string(),
            62 => "x86_64".to_string(),
            183 => "aarch64".to_string(),
            243 => "riscv".to_string(),
            258 => "loongarch".to_string(),
            m => format!("machine {m}"),
        };
        write!(
            f,
            "{name} ({}-bit, {}-endian)",
            if self.class64 { 64 } else { 32 },
            if self.little_endian { "little" } else { "big" }
        )
    }
}

/// The dynamic-linking facts of one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    pub arch: Option<Arch>,
    /// `e_type` (ET_EXEC = 2, ET_DYN = 3).
    pub file_type: u16,
    /// DT_NEEDED names, in order.
    pub needed: Vec<String>,
    pub soname: Option<String>,
    /// DT_RPATH, unexpanded (`$ORIGIN` and all).
    pub rpath: Option<OsString>,
    /// DT_RUNPATH, unexpanded.
    pub runpath: Option<OsString>,
    /// The highest `GLIBC_x.y` in the verneed table.
    pub glibc: Option<(u32, u32)>,
}

/// True when `path` starts with the ELF magic (a script does not).
pub fn is_elf(path: &Path) -> Result<bool, String> {
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match f.read(&mut magic[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(magic == *b"\x7fELF")
}

/// Reads the dynamic-linking facts of the ELF file at `path`.
pub fn read_info(path: &Path) -> Result<ElfInfo, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cache = ReadCache::new(f);
    parse(&cache).map_err(|e| format!("{}: {e}", path.display()))
}

/// The same as [`read_info`], on bytes in memory (fuzzing, tests).
pub fn parse_info(data: &[u8]) -> Result<ElfInfo, String> {
    parse(data)
}

/// Only the header's class, byte order and machine (cheap: the loader's
/// test of whether a library found on a search path can be used at all).
pub fn read_arch(path: &Path) -> Result<Arch, String> {
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = [0u8; 20];
    f.read_exact(&mut header)
        .map_err(|e| format!("{}: not an ELF file ({e})", path.display()))?;
    arch_of_header(&header).map_err(|e| format!("{}: {e}", path.display()))
}

fn arch_of_header(h: &[u8]) -> Result<Arch, String> {
    if h.len() < 20 || h[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let class64 = match h[4] {
        1 => false,
        2 => true,
        c => return Err(format!("bad ELF class {c}")),
    };
    let little_endian = match h[5] {
        1 => true,
        2 => false,
        d => return Err(format!("bad ELF byte order {d}")),
    };
    let machine = if little_endian {
        u16::from_le_bytes([h[18], h[19]])
    } else {
        u16::from_be_bytes([h[18], h[19]])
    };
    Ok(Arch {
        class64,
        little_endian,
        machine,
    })
}

fn parse<'data, R: ReadRef<'data>>(data: R) -> Result<ElfInfo, String> {
    match FileKind::parse(data).map_err(|e| format!("not an ELF file ({e})"))? {
        FileKind::Elf32 => parse_as::<elf::FileHeader32<Endianness>, R>(data),
        FileKind::Elf64 => parse_as::<elf::FileHeader64<Endianness>, R>(data),
        _ => Err("not an ELF file".into()),
    }
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
}

fn parse_as<'data, Elf, R>(data: R) -> Result<ElfInfo, String>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let bad = |what: &str, e: object::read::Error| format!("corrupt ELF file: {what}: {e}");
    let header = Elf::parse(data).map_err(|e| bad("header", e))?;
    let endian = header.endian().map_err(|e| bad("header", e))?;
    let mut info = ElfInfo {
        arch: Some(Arch {
            class64: header.is_class_64(),
            little_endian: endian == Endianness::Little,
            machine: header.e_machine(endian).0,
        }),
        file_type: header.e_type(endian).0,
        ..ElfInfo::default()
    };
    let sections = header
        .sections(endian, data)
        .map_err(|e| bad("section headers", e))?;
    if sections.is_empty() {
        // The loader reads PT_DYNAMIC, not sections; only `sstrip`ped files
        // lack them, and a program without section headers is not worth
        // the second reader.
        let has_dynamic = header
            .program_headers(endian, data)
            .map_err(|e| bad("program headers", e))?
            .iter()
            .any(|p| object::read::elf::ProgramHeader::p_type(p, endian) == elf::PT_DYNAMIC);
        if has_dynamic {
            return Err("dynamically linked but has no section headers (sstrip?): \
                 cannot read its libraries"
                .into());
        }
        return Ok(info);
    }

    // The tables we read whole are read into memory from a file (up to its
    // length): real ones are a few KiB, so a large one is refused before
    // anything is allocated for it.
    for s in sections.iter() {
        let kind = s.sh_type(endian);
        if (kind == elf::SHT_DYNAMIC || kind == elf::SHT_GNU_VERNEED)
            && s.sh_size(endian).into() > MAX_TABLE_BYTES
        {
            return Err(format!(
                "corrupt ELF file: a dynamic or version section of {} bytes \
                 (at most {MAX_TABLE_BYTES})",
                s.sh_size(endian).into()
            ));
        }
    }

    // The dynamic section: the first SHT_DYNAMIC, with its linked strings.
    if let Some(section) = sections
        .iter()
        .find(|s| s.sh_type(endian) == elf::SHT_DYNAMIC)
    {
        let entries: &[Elf::Dyn] = section
            .data_as_array(endian, data)
            .map_err(|_| "corrupt ELF file: dynamic section lies outside the file".to_string())?;
        let strings = sections
            .strings(endian, data, section.link(endian))
            .map_err(|e| bad("dynamic string table", e))?;
        for (i, d) in entries.iter().enumerate() {
            if i >= MAX_DYNAMIC_ENTRIES {
                return Err(format!(
                    "corrupt ELF file: more than {MAX_DYNAMIC_ENTRIES} dynamic entries"
                ));
            }
            let tag = d.d_tag(endian);
            if tag == elf::DT_NULL {
                break;
            }
            let is_string = [
                elf::DT_NEEDED,
                elf::DT_SONAME,
                elf::DT_RPATH,
                elf::DT_RUNPATH,
            ]
            .contains(&tag);
            if !is_string {
                continue;
            }
            let offset: u64 = d.d_val(endian).into();
            let value = u32::try_from(offset)
                .ok()
                .and_then(|o| strings.get(o).ok())
                .ok_or_else(|| {
                    format!("corrupt ELF file: dynamic entry {i} points outside its string table")
                })?;
            if tag == elf::DT_NEEDED {
                if info.needed.len() >= MAX_NEEDED {
                    return Err(format!(
                        "corrupt ELF file: more than {MAX_NEEDED} needed libraries"
                    ));
                }
                let name = utf8(value, "a needed library's name")?;
                if name.is_empty() {
                    return Err("corrupt ELF file: an empty needed library name".into());
                }
                info.needed.push(name);
            } else if tag == elf::DT_SONAME {
                info.soname = Some(utf8(value, "the SONAME")?);
            } else if tag == elf::DT_RPATH {
                info.rpath = Some(OsString::from_vec(value.to_vec()));
            } else {
                info.runpath = Some(OsString::from_vec(value.to_vec()));
            }
        }
    }

    // Version needs: every GLIBC_x.y[.z] whatever library it names (libc,
    // libm, libpthread … are all glibc).
    if let Some((mut needs, link)) = sections
        .gnu_verneed(endian, data)
        .map_err(|e| bad("version needs", e))?
    {
        let strings = sections
            .strings(endian, data, link)
            .map_err(|e| bad("version needs' string table", e))?;
        let mut records = 0usize;
        while let Some((_need, mut auxes)) = needs.next().map_err(|e| bad("version needs", e))? {
            records += 1;
            while let Some(aux) = auxes.next().map_err(|e| bad("version needs", e))? {
                records += 1;
                if records > MAX_VERSION_RECORDS {
                    return Err(format!(
                        "corrupt ELF file: more than {MAX_VERSION_RECORDS} version records"
                    ));
                }
                let name = aux
                    .name(endian, strings)
                    .map_err(|e| bad("version name", e))?;
                if let Some(v) = glibc_version_of(name) {
                    info.glibc = info.glibc.max(Some(v));
                }
            }
            if records > MAX_VERSION_RECORDS {
                return Err(format!(
                    "corrupt ELF file: more than {MAX_VERSION_RECORDS} version records"
                ));
            }
        }
    }
    Ok(info)
}

/// `GLIBC_2.34` → (2, 34); `GLIBC_2.2.5` → (2, 2); `GLIBC_PRIVATE` → None.
fn glibc_version_of(name: &[u8]) -> Option<(u32, u32)> {
    let rest = name.strip_prefix(b"GLIBC_")?;
    let rest = std::str::from_utf8(rest).ok()?;
    let mut parts = rest.split('.');
    let number = |s: Option<&str>| -> Option<u32> {
        let s = s?;
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let major = number(parts.next())?;
    let minor = number(parts.next())?;
    // A third part (2.2.5) is a patch level the loader does not compare.
    match parts.next() {
        None => {}
        Some(p) => {
            number(Some(p))?;
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor))
}

/// The highest `GLIBC_x.y` version `path` requires (None: static, or not
/// linked against glibc).
pub fn glibc_required(path: &Path) -> Result<Option<(u32, u32)>, String> {
    Ok(read_info(path)?.glibc)
}

/// The glibc of this process (`gnu_get_libc_version`).
#[cfg(target_env = "gnu")]
pub fn host_glibc() -> (u32, u32) {
    // SAFETY: gnu_get_libc_version takes nothing and returns a pointer to a
    // static NUL-terminated string owned by glibc.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    parse_dotted(version.to_bytes()).unwrap_or((0, 0))
}

/// Not a glibc build: (0, 0), which no glibc program satisfies.
#[cfg(not(target_env = "gnu"))]
pub fn host_glibc() -> (u32, u32) {
    (0, 0)
}

/// "2.36" → (2, 36), "2.36.1" → (2, 36).
fn parse_dotted(s: &[u8]) -> Option<(u32, u32)> {
    let mut prefixed = b"GLIBC_".to_vec();
    prefixed.extend_from_slice(s);
    glibc_version_of(&prefixed)
}

/// The machine this process runs on.
pub fn host_arch() -> Arch {
    let little_endian = cfg!(target_endian = "little");
    let class64 = cfg!(target_pointer_width = "64");
    let machine = if cfg!(target_arch = "x86_64") {
        62
    } else if cfg!(target_arch = "aarch64") {
        183
    } else if cfg!(target_arch = "x86") {
        3
    } else if cfg!(target_arch = "arm") {
        40
    } else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
        243
    } else if cfg!(target_arch = "powerpc64") {
        21
    } else if cfg!(target_arch = "powerpc") {
        20
    } else if cfg!(target_arch = "s390x") {
        22
    } else if cfg!(target_arch = "loongarch64") {
        258
    } else {
        // Any other: whatever our own executable says.
        return read_arch(Path::new("/proc/self/exe")).unwrap_or(Arch {
            class64,
            little_endian,
            machine: 0,
        });
    };
    Arch {
        class64,
        little_endian,
        machine,
    }
}

/// Can the ELF file at `path` run here? Its machine and class must be this
/// host's and its glibc needs no newer than this host's. The error names
/// the file and both sides, e.g. "prog needs glibc 2.38 but this host has
/// 2.36". A file that is not ELF (a script) passes: its interpreter is the
/// host's business.
pub fn check_runs_here(path: &Path) -> Result<(), String> {
    if !is_elf(path)? {
        return Ok(());
    }
    let info = read_info(path)?;
    check_info(path, &info, host_arch(), host_glibc())
}

/// [`check_runs_here`] for several files (a program and its staged
/// libraries): every problem, one per line.
pub fn check_all_run_here(paths: &[&Path]) -> Result<(), String> {
    let problems: Vec<String> = paths
        .iter()
        .filter_map(|p| check_runs_here(p).err())
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn check_info(path: &Path, info: &ElfInfo, host: Arch, glibc: (u32, u32)) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    if let Some(arch) = info.arch {
        if arch != host {
            return Err(format!(
                "{name} is built for {arch} but this host is {host}"
            ));
        }
    }
    if let Some((major, minor)) = info.glibc {
        if (major, minor) > glibc {
            let have = if glibc == (0, 0) {
                "no glibc".to_string()
            } else {
                format!("{}.{}", glibc.0, glibc.1)
            };
            return Err(format!(
                "{name} needs glibc {major}.{minor} but this host has {have}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn temp_path(tag: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::env::temp_dir().join(format!("gw-stage-elf-{}-{tag}-{n}", std::process::id()))
    }

    /// A real dynamically linked program of this machine (coreutils).
    fn system_program() -> Vec<u8> {
        std::fs::read("/bin/ls").expect("/bin/ls is readable")
    }

    fn replace_all(data: &mut [u8], from: &[u8], to: &[u8]) -> usize {
        assert_eq!(from.len(), to.len());
        let mut n = 0;
        let mut i = 0;
        while i + from.len() <= data.len() {
            if &data[i..i + from.len()] == from {
                data[i..i + from.len()].copy_from_slice(to);
                n += 1;
                i += from.len();
            } else {
                i += 1;
            }
        }
        n
    }

    #[test]
    fn glibc_names_parse() {
        assert_eq!(glibc_version_of(b"GLIBC_2.34"), Some((2, 34)));
        assert_eq!(glibc_version_of(b"GLIBC_2.2.5"), Some((2, 2)));
        assert_eq!(glibc_version_of(b"GLIBC_PRIVATE"), None);
        assert_eq!(glibc_version_of(b"GLIBC_ABI_DT_RELR"), None);
        assert_eq!(glibc_version_of(b"GLIBC_2."), None);
        assert_eq!(glibc_version_of(b"GLIBC_2.3.4.5"), None);
        assert_eq!(glibc_version_of(b"GLIBC_99999999999.1"), None);
        assert_eq!(glibc_version_of(b"GCC_3.0"), None);
        assert_eq!(parse_dotted(b"2.36"), Some((2, 36)));
    }

    #[test]
    fn host_glibc_matches_ldd() {
        let host = host_glibc();
        assert!(host >= (2, 17), "glibc {host:?}");
        // `ldd --version` names the same version on its first line.
        if let Ok(out) = std::process::Command::new("ldd").arg("--version").output() {
            let text = String::from_utf8_lossy(&out.stdout);
            let first = text.lines().next().unwrap_or("");
            assert!(
                first.ends_with(&format!(" {}.{}", host.0, host.1)),
                "ldd says {first:?}, we say {host:?}"
            );
        }
    }

    #[test]
    fn system_program_runs_here() {
        let ls = Path::new("/bin/ls");
        let info = read_info(ls).unwrap();
        assert_eq!(info.arch, Some(host_arch()));
        assert!(info.needed.iter().any(|n| n == "libc.so.6"), "{info:?}");
        let glibc = glibc_required(ls)
            .unwrap()
            .expect("ls uses versioned glibc symbols");
        assert!(glibc >= (2, 2) && glibc <= host_glibc(), "{glibc:?}");
        check_runs_here(ls).unwrap();
        check_all_run_here(&[ls, Path::new("/bin/sh")]).unwrap();
        // The in-memory reader agrees with the file reader.
        assert_eq!(parse_info(&system_program()).unwrap(), info);
    }

    #[test]
    fn newer_glibc_is_refused_naming_both_versions() {
        let mut data = system_program();
        // Same-length rewrite of every version name in the string table.
        let n = replace_all(&mut data, b"GLIBC_2.2.5", b"GLIBC_9.9.9")
            + replace_all(&mut data, b"GLIBC_2.3.4", b"GLIBC_9.9.9")
            + replace_all(&mut data, b"GLIBC_2.14\0", b"GLIBC_9.77\0");
        assert!(n > 0, "ls names none of the patched versions");
        let path = temp_path("newglibc");
        std::fs::write(&path, &data).unwrap();
        let got = glibc_required(&path).unwrap();
        let err = check_runs_here(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        let want = if data.windows(11).any(|w| w == b"GLIBC_9.77\0") {
            (9, 77)
        } else {
            (9, 9)
        };
        assert_eq!(got, Some(want));
        let host = host_glibc();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            err,
            format!(
                "{name} needs glibc {}.{} but this host has {}.{}",
                want.0, want.1, host.0, host.1
            )
        );
    }

    #[test]
    fn foreign_machine_is_refused_naming_both() {
        let mut data = system_program();
        let other: u16 = if host_arch().machine == 183 { 62 } else { 183 };
        let bytes = if host_arch().little_endian {
            other.to_le_bytes()
        } else {
            other.to_be_bytes()
        };
        data[18..20].copy_from_slice(&bytes);
        let path = temp_path("foreign");
        std::fs::write(&path, &data).unwrap();
        let err = check_runs_here(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        let want_other = if other == 183 { "aarch64" } else { "x86_64" };
        assert!(err.contains(&format!("built for {want_other}")), "{err}");
        assert!(
            err.contains(&format!("this host is {}", host_arch())),
            "{err}"
        );
    }

    #[test]
    fn host_check_logic() {
        let host = Arch {
            class64: true,
            little_endian: true,
            machine: 62,
        };
        let p = Path::new("/x/prog");
        let mut info = ElfInfo {
            arch: Some(host),
            glibc: Some((2, 36)),
            ..ElfInfo::default()
        };
        check_info(p, &info, host, (2, 36)).unwrap();
        assert_eq!(
            check_info(p, &info, host, (2, 35)).unwrap_err(),
            "prog needs glibc 2.36 but this host has 2.35"
        );
        assert_eq!(
            check_info(p, &info, host, (0, 0)).unwrap_err(),
            "prog needs glibc 2.36 but this host has no glibc"
        );
        info.arch = Some(Arch {
            class64: false,
            ..host
        });
        assert_eq!(
            check_info(p, &info, host, (2, 36)).unwrap_err(),
            "prog is built for x86_64 (32-bit, little-endian) but this host is x86_64 (64-bit, little-endian)"
        );
        info.arch = None;
        info.glibc = None;
        check_info(p, &info, host, (2, 36)).unwrap();
    }

    #[test]
    fn scripts_and_garbage() {
        let script = temp_path("script");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert!(!is_elf(&script).unwrap());
        check_runs_here(&script).unwrap();
        assert!(read_info(&script).unwrap_err().contains("not an ELF file"));
        std::fs::remove_file(&script).unwrap();

        let empty = temp_path("empty");
        std::fs::write(&empty, "").unwrap();
        assert!(!is_elf(&empty).unwrap());
        assert!(read_arch(&empty).unwrap_err().contains("not an ELF file"));
        std::fs::remove_file(&empty).unwrap();

        assert!(read_info(Path::new("/nonexistent/gw-prog"))
            .unwrap_err()
            .starts_with("/nonexistent/gw-prog: "));
    }

    /// Every truncation of a real program, through the file reader.
    #[test]
    fn truncated_files_are_errors_or_partial() {
        let data = system_program();
        let path = temp_path("trunc");
        let step = (data.len() / 97).max(1);
        let mut len = 0;
        while len < data.len() {
            std::fs::write(&path, &data[..len]).unwrap();
            // Either outcome is fine; a panic is not.
            let _ = read_info(&path);
            let _ = check_runs_here(&path);
            len += step;
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn huge_counts_in_headers_are_errors() {
        let mut data = system_program();
        // e_shnum = 0xffff, e_shoff near the end: section headers would lie
        // outside the file.
        assert!(host_arch().class64 && host_arch().little_endian);
        data[0x3c..0x3e].copy_from_slice(&0xffffu16.to_le_bytes());
        assert!(parse_info(&data).is_err());
        let mut data = system_program();
        data[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_info(&data).is_err());

        // A dynamic section claiming a TiB: refused before it is read.
        let mut data = system_program();
        let word = |d: &[u8], at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
        let shoff = word(&data, 0x28) as usize;
        let shentsize = u16::from_le_bytes([data[0x3a], data[0x3b]]) as usize;
        let shnum = u16::from_le_bytes([data[0x3c], data[0x3d]]) as usize;
        let dynamic = (0..shnum)
            .map(|i| shoff + i * shentsize)
            .find(|&at| u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) == 6)
            .expect("ls has a dynamic section");
        data[dynamic + 32..dynamic + 40].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let path = temp_path("hugedyn");
        std::fs::write(&path, &data).unwrap();
        let err = read_info(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            err.contains("dynamic or version section of 1099511627776 bytes"),
            "{err}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = parse_info(&bytes);
            let mut with_magic = b"\x7fELF\x02\x01\x01".to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = parse_info(&with_magic);
        }

        #[test]
        fn mutated_program_never_panics(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..32),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut data = system_program();
            for (at, byte) in &edits {
                let i = at.index(data.len());
                data[i] = *byte;
            }
            let _ = parse_info(&data);
            let len = cut.index(data.len());
            let _ = parse_info(&data[..len]);
        }

        /// Mutations aimed at the header fields that hold offsets and counts.
        #[test]
        fn mutated_header_never_panics(
            field in 0usize..64, value in any::<u64>(), width in prop::sample::select(vec![1usize, 2, 4, 8]),
        ) {
            let mut data = system_program();
            let bytes = value.to_le_bytes();
            let end = (field + width).min(64);
            data[field..end].copy_from_slice(&bytes[..end - field]);
            let _ = parse_info(&data);
        }
    }
}
