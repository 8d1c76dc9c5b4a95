//! Control variables: one per `GW_*` parameter, in the order of the
//! runtime's tables (core, each method, then the MPI layer), named as the
//! environment variable (`GW_TCP_SNDBUF`).
//!
//! A write is a [`gridwire_core::params::set_override`], which every later
//! read of the parameter honours; when it may happen follows from when the
//! runtime reads the parameter ([`When`]).

use super::*;
use gridwire_core::params::{self, Kind, ParamDecl};

/// When a written value can still take effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    /// Set by the launcher for the whole job (identity, secret, bootstrap):
    /// never writable (`MPI_T_SCOPE_READONLY`).
    Never,
    /// Read when MPI_Init builds the runtime: writable before it, never after.
    BeforeInit,
    /// Read again later (at each use, per new peer, or applied at once).
    Anytime,
}

pub(crate) struct Cvar {
    pub decl: &'static ParamDecl,
    /// The category holding it ("gw_core", "gw_tcp", ..., "gw_mpi").
    pub category: String,
    pub when: When,
}

const SCOPE_READONLY: c_int = 2;
const SCOPE_LOCAL: c_int = 3;

/// Length of the buffer a text variable is read into (one element per byte).
pub(crate) const TEXT_LEN: usize = 1024;

/// Every declared parameter: the runtime's tables, then the MPI layer's.
pub(crate) fn all_decls() -> Vec<&'static ParamDecl> {
    let mut v = params::all_decls();
    v.extend(gridwire_mpi::params::MPI_PARAMS.iter());
    v
}

fn when_of(d: &ParamDecl) -> When {
    match d.name {
        "JOB_SECRET" | "JOB_ID" | "HOST_ID" | "PMI" | "WORLD" => When::Never,
        n if n.starts_with("MPI_") && n != "MPI_SPIN_US" && n != "MPI_NO_CMA" => When::Anytime,
        _ => When::BeforeInit,
    }
}

pub(crate) fn cvars() -> &'static [Cvar] {
    static T: std::sync::OnceLock<Vec<Cvar>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut v: Vec<Cvar> = params::CORE_PARAMS
            .iter()
            .map(|d| Cvar {
                decl: d,
                category: "gw_core".into(),
                when: when_of(d),
            })
            .collect();
        for m in gridwire_core::method::registry() {
            v.extend(m.params.iter().map(|d| Cvar {
                decl: d,
                category: format!("gw_{}", m.name),
                when: when_of(d),
            }));
        }
        // The transforms' policy (GW_ENCRYPT, GW_COMPRESS, …) and each
        // transform's own parameters, in the order `params::all_decls` has.
        v.extend(
            gridwire_core::method::transform::policy::PARAMS
                .iter()
                .map(|d| Cvar {
                    decl: d,
                    category: "gw_transform".into(),
                    when: when_of(d),
                }),
        );
        // Relays (GW_RELAY, GW_RELAYED_SITES) choose links too.
        v.extend(gridwire_core::method::relay::PARAMS.iter().map(|d| Cvar {
            decl: d,
            category: "gw_transform".into(),
            when: when_of(d),
        }));
        // The measured selection (GW_SELECT, GW_SELECT_ESTIMATES).
        v.extend(
            gridwire_core::context::measured::PARAMS
                .iter()
                .map(|d| Cvar {
                    decl: d,
                    category: "gw_core".into(),
                    when: when_of(d),
                }),
        );
        for t in gridwire_core::method::transform::registry() {
            v.extend(t.params.iter().map(|d| Cvar {
                decl: d,
                category: format!("gw_{}", t.name),
                when: when_of(d),
            }));
        }
        v.extend(gridwire_mpi::params::MPI_PARAMS.iter().map(|d| Cvar {
            decl: d,
            category: "gw_mpi".into(),
            when: when_of(d),
        }));
        v
    })
}

impl Cvar {
    pub fn name(&self) -> String {
        self.decl.var()
    }

    pub fn datatype(&self) -> MPI_Datatype {
        match self.decl.kind {
            Kind::UInt { .. } | Kind::Size { .. } => MPI_UNSIGNED_LONG_LONG,
            Kind::Bool | Kind::Choice(_) => MPI_INT,
            Kind::Text => MPI_CHAR,
        }
    }

    pub fn enumtype(&self) -> usize {
        match self.decl.kind {
            Kind::Choice(_) => enum_named(&self.name().to_ascii_lowercase()),
            _ => 0,
        }
    }

    /// Elements a handle reads and writes.
    pub fn count(&self) -> usize {
        if self.datatype() == MPI_CHAR {
            TEXT_LEN
        } else {
            1
        }
    }

    pub fn scope(&self) -> c_int {
        match self.when {
            When::Never => SCOPE_READONLY,
            _ => SCOPE_LOCAL,
        }
    }

    /// Why a write is refused now, if it is: `mpi_started` = MPI_Init ran.
    pub fn refuse_write(&self, mpi_started: bool) -> Option<c_int> {
        match self.when {
            When::Never => Some(MPI_T_ERR_CVAR_SET_NEVER),
            // The runtime is built once: a later value would never be read.
            When::BeforeInit if mpi_started => Some(MPI_T_ERR_CVAR_SET_NEVER),
            _ => None,
        }
    }

    /// The current value as the handle's bytes (native endianness).
    pub fn read(&self) -> Vec<u8> {
        let text = params::current(self.decl).unwrap_or_else(|_| self.decl.default.to_string());
        match self.decl.kind {
            Kind::UInt { .. } | Kind::Size { .. } => {
                params::current_num(self.decl).to_ne_bytes().to_vec()
            }
            Kind::Bool => (params::current_num(self.decl) as c_int)
                .to_ne_bytes()
                .to_vec(),
            Kind::Choice(words) => (words.iter().position(|w| *w == text).unwrap_or(0) as c_int)
                .to_ne_bytes()
                .to_vec(),
            Kind::Text => {
                let mut b = text.into_bytes();
                b.truncate(TEXT_LEN - 1);
                b.push(0);
                b
            }
        }
    }

    /// Turns the bytes of a write into the text the parameter parser takes.
    pub fn text_of(&self, bytes: &[u8]) -> TResult<String> {
        let int = || c_int::from_ne_bytes(bytes[..4].try_into().expect("4 bytes"));
        Ok(match self.decl.kind {
            Kind::UInt { .. } | Kind::Size { .. } => {
                u64::from_ne_bytes(bytes[..8].try_into().expect("8 bytes")).to_string()
            }
            Kind::Bool => if int() != 0 { "1" } else { "0" }.to_string(),
            Kind::Choice(words) => {
                let i = usize::try_from(int()).map_err(|_| MPI_ERR_ARG)?;
                words.get(i).ok_or(MPI_ERR_ARG)?.to_string()
            }
            Kind::Text => {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                String::from_utf8_lossy(&bytes[..end]).into_owned()
            }
        })
    }

    /// Bytes a read or write moves: the element size times [`Cvar::count`].
    pub fn bytes(&self) -> usize {
        match self.datatype() {
            MPI_UNSIGNED_LONG_LONG => 8,
            MPI_INT => 4,
            _ => TEXT_LEN,
        }
    }
}

/// Makes the runtime use a written value where it is not read again on its own.
fn apply_now(name: &str) {
    match name {
        "MPI_UNEXPECTED_LIMIT" => {
            if let Some(m) = crate::handles::MPI.get() {
                let v = gridwire_mpi::params::num(name);
                m.engine
                    .set_held_limit(usize::try_from(v).unwrap_or(usize::MAX));
            }
        }
        "MPI_ALLREDUCE_SPLIT" => {
            let v = gridwire_mpi::params::num(name);
            gridwire_mpi::coll::set_allreduce_split(usize::try_from(v).unwrap_or(usize::MAX));
        }
        _ => {}
    }
}

/// Live handles: handle -> cvar index.
static HANDLES: Mutex<Ids<usize>> = Mutex::new(Ids::new());

pub(super) fn free_all() {
    lock(&HANDLES).clear();
}

fn handle(h: usize) -> TResult<&'static Cvar> {
    let i = *lock(&HANDLES).get(h).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    Ok(&cvars()[i])
}

fn mpi_started() -> bool {
    crate::handles::MPI.get().is_some()
}

mpi_fn!(fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(n: *mut c_int) -> c_int {
    // SAFETY: output argument.
    t_run(|| { unsafe { put(n, cvars().len() as c_int) }; Ok(()) })
});

mpi_fn!(fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(i: c_int, name: *mut c_char, name_len: *mut c_int,
        verbosity: *mut c_int, datatype: *mut MPI_Datatype, enumtype: *mut usize, desc: *mut c_char,
        desc_len: *mut c_int, bind: *mut c_int, scope: *mut c_int) -> c_int {
    t_run(|| {
        let c = &cvars()[index(i, cvars().len())?];
        let desc_text = format!("{} (default: {})", c.decl.help, if c.decl.default.is_empty() { "empty" } else { c.decl.default });
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put_tstr(&c.name(), name, name_len);
            put(verbosity, if c.when == When::Never { VERBOSITY_USER_BASIC } else { VERBOSITY_TUNER_BASIC });
            put(datatype, c.datatype());
            put(enumtype, c.enumtype());
            put_tstr(&desc_text, desc, desc_len);
            put(bind, BIND_NO_OBJECT);
            put(scope, c.scope());
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, out: *mut c_int) -> c_int {
    t_run(|| {
        // SAFETY: `name` is a C string argument.
        let i = unsafe { find_name(name, |s| cvars().iter().position(|c| c.name() == s)) }?;
        // SAFETY: output argument.
        unsafe { put(out, i) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(i: c_int, _obj: *mut Void, h: *mut usize, count: *mut c_int) -> c_int {
    t_run(|| {
        let idx = index(i, cvars().len())?;
        if h.is_null() {
            return Err(MPI_ERR_ARG);
        }
        // Every variable is bound to no object: the object argument is ignored.
        let id = lock(&HANDLES).insert(idx);
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put(h, id);
            put(count, cvars()[idx].count() as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(h: *mut usize) -> c_int {
    t_run(|| {
        if h.is_null() {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        // SAFETY: checked in/out argument.
        let id = unsafe { *h };
        lock(&HANDLES).remove(id).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        // SAFETY: as above; MPI_T_CVAR_HANDLE_NULL is 0.
        unsafe { *h = 0 };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_cvar_read / PMPI_T_cvar_read(h: usize, buf: *mut Void) -> c_int {
    t_run(|| {
        let c = handle(h)?;
        if buf.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let v = c.read();
        // SAFETY: the buffer holds `count` elements of the variable's type
        // (the MPI contract), which is at least `v.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), buf as *mut u8, v.len()) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_cvar_write / PMPI_T_cvar_write(h: usize, buf: *const Void) -> c_int {
    t_run(|| {
        let c = handle(h)?;
        if let Some(why) = c.refuse_write(mpi_started()) {
            return Err(why);
        }
        if buf.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let bytes: Vec<u8> = if c.datatype() == MPI_CHAR {
            // A string: up to its NUL, never past the handle's count.
            let p = buf as *const u8;
            (0..TEXT_LEN - 1)
                // SAFETY: the buffer holds `count` (TEXT_LEN) bytes or a
                // shorter NUL-terminated string; reading stops at the NUL.
                .map(|i| unsafe { p.add(i).read() })
                .take_while(|&b| b != 0)
                .collect()
        } else {
            // SAFETY: the buffer holds one element of the variable's type.
            unsafe { std::slice::from_raw_parts(buf as *const u8, c.bytes()) }.to_vec()
        };
        let text = c.text_of(&bytes)?;
        params::set_override(c.decl, &text).map_err(|_| MPI_ERR_ARG)?;
        apply_now(c.decl.name);
        Ok(())
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_is_a_cvar_once() {
        let t = cvars();
        assert_eq!(t.len(), all_decls().len());
        for d in all_decls() {
            assert_eq!(
                t.iter().filter(|c| c.name() == d.var()).count(),
                1,
                "{}",
                d.name
            );
        }
        assert!(t
            .iter()
            .any(|c| c.name() == "GW_TCP_SNDBUF" && c.category == "gw_tcp"));
        assert!(t
            .iter()
            .any(|c| c.name() == "GW_MPI_UNEXPECTED_LIMIT" && c.category == "gw_mpi"));
    }

    #[test]
    fn writability_follows_when_the_runtime_reads() {
        let by = |n: &str| cvars().iter().find(|c| c.name() == n).unwrap();
        assert_eq!(
            by("GW_JOB_SECRET").refuse_write(false),
            Some(MPI_T_ERR_CVAR_SET_NEVER)
        );
        assert_eq!(by("GW_METHODS").refuse_write(false), None);
        assert_eq!(
            by("GW_METHODS").refuse_write(true),
            Some(MPI_T_ERR_CVAR_SET_NEVER)
        );
        assert_eq!(by("GW_MPI_UNEXPECTED_LIMIT").refuse_write(true), None);
    }

    #[test]
    fn values_round_trip_through_bytes() {
        let c = cvars()
            .iter()
            .find(|c| c.name() == "GW_MPI_EAGER_UDP")
            .unwrap();
        assert_eq!(c.read(), 16384u64.to_ne_bytes());
        assert_eq!(c.text_of(&4096u64.to_ne_bytes()).unwrap(), "4096");
        let p = cvars().iter().find(|c| c.name() == "GW_PMI").unwrap();
        assert_eq!(p.datatype(), MPI_INT);
        assert!(p.enumtype() > 0);
        assert_eq!(p.text_of(&99i32.to_ne_bytes()), Err(MPI_ERR_ARG));
    }
}
