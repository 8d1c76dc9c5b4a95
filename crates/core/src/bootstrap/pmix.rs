//! PMIx client: the start-up of Open MPI's `mpirun` (its daemons serve PMIx
//! to the processes they start), Slurm's `srun --mpi=pmix` and PRRTE's
//! `prterun`, through OpenPMIx's client library.
//!
//! PMIx has no wire protocol meant for clients to speak themselves (the
//! library talks to the server over a versioned, internal buffer format and
//! often reads job data from shared memory the server writes), so this
//! client drives `libpmix` rather than a socket. The library is loaded at
//! run time (`dlopen` through `libloading`) instead of linked: gridwire has
//! no build- or load-time dependency on it, programs run on hosts without
//! it, and only a process whose environment offers PMIx (or that is told
//! `GW_PMI=pmix`) looks for it. The library is loaded once per process and
//! never unloaded: it starts a progress thread of its own that must not
//! outlive its code.
//!
//! Mapping of the runtime's operations:
//!
//! * start-up: `PMIx_Init` gives the namespace and rank; the job size is the
//!   job-level `PMIX_JOB_SIZE` (`PMIx_Get` of the namespace's wildcard
//!   rank), the application number `PMIX_APPNUM`, the universe
//!   `PMIX_UNIV_SIZE`;
//! * put: `PMIx_Put(PMIX_GLOBAL, key, string)`; commit: `PMIx_Commit`;
//! * barrier: `PMIx_Commit` of what is pending, then `PMIx_Fence` over the
//!   whole namespace with `PMIX_COLLECT_DATA`, after which every process's
//!   puts are in the local store;
//! * get: `PMIx_Get(owner's proc, key)` with `PMIX_OPTIONAL` (look only in
//!   the local store, which the collecting fence filled: a key nobody put
//!   is `None` at once, as on PMI-1, instead of a wait for data that never
//!   comes). PMIx keys belong to a process; [`Pmix::get`] without an owner
//!   looks at every rank in turn, [`Pmix::get_from`] asks the one that put
//!   it. (`PMIX_RANK_UNDEF`, "any process", finds nothing in the
//!   shared-memory store Open MPI uses: tried with OpenPMIx 4.2.2.)
//! * abort: `PMIx_Abort(code, msg, NULL, 0)` (the whole namespace);
//!   finalize: `PMIx_Finalize`;
//! * spawn: `PMIx_Spawn`, the preput pairs as environment variables
//!   (`pmix_spawn.rs`).
//!
//! Every call into the library runs on one worker thread and the caller
//! waits at most the reply timeout (`GW_PMI_TIMEOUT`, as for PMI-1 and
//! PMI-2): a server that accepts the connection and never answers blocks
//! `PMIx_Init` forever inside the library (seen with OpenPMIx 4.2.2), and
//! only a wait outside the call bounds it. After such a timeout the client
//! is unusable (the worker is still inside the library) and says so.
//!
//! What the library hands back is treated as hostile: every string is
//! bounded (`strnlen`) and checked to be UTF-8 without NULs, every value's
//! type is checked before its union member is read, numbers are range
//! checked, and returned values are released with `PMIx_Value_destruct` +
//! `free` as `PMIX_VALUE_RELEASE` does.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use super::pmi::reply_timeout_from_env;
use crate::error::{Error, Result};

/// Where the library is looked for, in order: the soname on the loader's
/// path (Debian's `libpmix2` links it into `/usr/lib/x86_64-linux-gnu`),
/// then the library's own directory in Debian's layout, which is not on
/// that path, for an installation where the link is missing.
pub const LIBRARY_CANDIDATES: &[&str] = &[
    "libpmix.so.2",
    "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2",
];

/// Longest key [`Pmix::put`]/[`Pmix::get`] accept: `PMIX_MAX_KEYLEN`.
pub const MAX_KEY_LEN: usize = abi::MAX_KEYLEN;

/// Longest value [`Pmix::put`] accepts and [`Pmix::get`] reads back. PMIx
/// itself has no limit; this one bounds what is read from the library and
/// is far above what the runtime publishes per key.
pub const MAX_VALUE_LEN: usize = 65_535;

/// Longest abort message passed on.
const MAX_ABORT_MSG: usize = 1023;

/// Variables whose presence says a PMIx server started this process:
/// OpenPMIx servers (Open MPI 4/5, PRRTE, Slurm's pmix plugin) set the
/// namespace and rank, and the server's address in one `PMIX_SERVER_URI*`
/// per protocol version they speak.
pub const ENV_MARKERS: &[&str] = &[
    "PMIX_NAMESPACE",
    "PMIX_SERVER_URI",
    "PMIX_SERVER_URI2",
    "PMIX_SERVER_URI21",
    "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI4",
    "PMIX_SERVER_URI41",
];

fn boot(msg: impl Into<String>) -> Error {
    Error::Bootstrap(msg.into())
}

/// True when `lookup` (the environment) shows a PMIx server.
pub fn offered_by(lookup: impl Fn(&str) -> Option<String>) -> bool {
    ENV_MARKERS
        .iter()
        .any(|k| lookup(k).is_some_and(|v| !v.trim().is_empty()))
}

/// The C declarations used, written from OpenPMIx 4.2.2's
/// `pmix_common.h` (the numbers are facts of its ABI, stable since PMIx 2;
/// the test `layout_matches_the_installed_header` compiles a C file against
/// the installed header and compares every one of them).
pub(crate) mod abi {
    use std::ffi::{c_char, c_int};

    pub const MAX_NSLEN: usize = 255;
    pub const MAX_KEYLEN: usize = 511;

    /// "Any process": not used (see the module's notes on get), kept so
    /// that the layout test pins every special rank.
    #[allow(dead_code)]
    pub const RANK_UNDEF: u32 = u32::MAX;
    pub const RANK_WILDCARD: u32 = u32::MAX - 1;
    /// `PMIX_RANK_INVALID`: the special ranks are this one and above.
    pub const RANK_INVALID: u32 = u32::MAX - 3;

    pub const SUCCESS: c_int = 0;
    pub const ERR_TIMEOUT: c_int = -24;
    pub const ERR_UNREACH: c_int = -25;
    pub const ERR_NOT_FOUND: c_int = -46;

    /// `pmix_scope_t` `PMIX_GLOBAL`: shared with every process of the job.
    pub const GLOBAL: u8 = 3;

    // pmix_data_type_t values.
    pub const T_BOOL: u16 = 1;
    pub const T_STRING: u16 = 3;
    pub const T_SIZE: u16 = 4;
    pub const T_INT: u16 = 6;
    pub const T_INT8: u16 = 7;
    pub const T_INT16: u16 = 8;
    pub const T_INT32: u16 = 9;
    pub const T_INT64: u16 = 10;
    pub const T_UINT: u16 = 11;
    pub const T_UINT8: u16 = 12;
    pub const T_UINT16: u16 = 13;
    pub const T_UINT32: u16 = 14;
    pub const T_UINT64: u16 = 15;

    // Attribute keys.
    pub const JOB_SIZE: &str = "pmix.job.size";
    pub const APPNUM: &str = "pmix.appnum";
    pub const UNIV_SIZE: &str = "pmix.univ.size";
    pub const COLLECT_DATA: &str = "pmix.collect";
    pub const OPTIONAL: &str = "pmix.optional";
    pub const TIMEOUT: &str = "pmix.timeout";

    /// `pmix_proc_t`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Proc {
        pub nspace: [c_char; MAX_NSLEN + 1],
        pub rank: u32,
    }

    impl Proc {
        pub fn zeroed() -> Proc {
            Proc {
                nspace: [0; MAX_NSLEN + 1],
                rank: 0,
            }
        }
    }

    /// The union of `pmix_value_t`: only the members read or written here,
    /// and room for the largest (`pmix_envar_t`: two pointers and a char).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub union ValueData {
        pub flag: bool,
        pub string: *mut c_char,
        pub size: usize,
        pub integer: c_int,
        pub int8: i8,
        pub int16: i16,
        pub int32: i32,
        pub int64: i64,
        pub uint: u32,
        pub uint8: u8,
        pub uint16: u16,
        pub uint32: u32,
        pub uint64: u64,
        pub room: [u64; 3],
    }

    /// `pmix_value_t`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Value {
        pub type_: u16,
        pub data: ValueData,
    }

    /// `pmix_info_t`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Info {
        pub key: [c_char; MAX_KEYLEN + 1],
        pub flags: u32,
        pub value: Value,
    }

    impl Info {
        pub fn keyed(key: &str, value: Value) -> Info {
            let mut k = [0 as c_char; MAX_KEYLEN + 1];
            // Attribute names are short ASCII constants; the last byte
            // stays NUL whatever happens.
            for (d, s) in k.iter_mut().zip(key.bytes().take(MAX_KEYLEN)) {
                *d = s as c_char;
            }
            Info {
                key: k,
                flags: 0,
                value,
            }
        }

        pub fn flag(key: &str, on: bool) -> Info {
            Info::keyed(
                key,
                Value {
                    type_: T_BOOL,
                    data: ValueData { flag: on },
                },
            )
        }

        pub fn int(key: &str, v: c_int) -> Info {
            Info::keyed(
                key,
                Value {
                    type_: T_INT,
                    data: ValueData { integer: v },
                },
            )
        }
    }

    pub type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
    pub type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
    pub type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
    pub type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
    pub type CommitFn = unsafe extern "C" fn() -> c_int;
    pub type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
    pub type GetFn = unsafe extern "C" fn(
        *const Proc,
        *const c_char,
        *const Info,
        usize,
        *mut *mut Value,
    ) -> c_int;
    pub type ValueDestructFn = unsafe extern "C" fn(*mut Value);
    pub type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
    pub type VersionFn = unsafe extern "C" fn() -> *const c_char;
}

use abi::{Info, Proc, Value};

/// The library's entry points, resolved once.
struct Api {
    init: abi::InitFn,
    finalize: abi::FinalizeFn,
    abort: abi::AbortFn,
    put: abi::PutFn,
    commit: abi::CommitFn,
    fence: abi::FenceFn,
    get: abi::GetFn,
    value_destruct: abi::ValueDestructFn,
    error_string: abi::ErrorStringFn,
    version: abi::VersionFn,
    spawn: spawn::SpawnFn,
    /// Which candidate was loaded, for messages.
    path: &'static str,
}

/// Loads the library from the first of `candidates` that opens and has
/// every entry point; the error names each one tried and why it failed.
fn load_from(candidates: &[&'static str]) -> std::result::Result<Api, String> {
    let mut tried = Vec::new();
    for &path in candidates {
        // RTLD_GLOBAL: OpenPMIx dlopens plugins of its own
        // (pmix_mca_*.so) that expect its symbols to be visible.
        // SAFETY: loading libpmix runs its initialisers, which only set up
        // the library's own state.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
            )
        };
        let lib = match lib {
            Ok(l) => l,
            Err(e) => {
                tried.push(format!("{path} ({e})"));
                continue;
            }
        };
        match resolve(lib, path) {
            Ok(api) => return Ok(api),
            Err(e) => tried.push(format!("{path} ({e})")),
        }
    }
    Err(format!("tried {}", tried.join(", ")))
}

fn resolve(
    lib: libloading::os::unix::Library,
    path: &'static str,
) -> std::result::Result<Api, String> {
    macro_rules! sym {
        ($name:literal, $ty:ty) => {{
            // SAFETY: the symbol is the libpmix function of that name, whose
            // C signature `$ty` copies from pmix.h (checked by the layout
            // test for the types it uses).
            let s: libloading::os::unix::Symbol<$ty> =
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("no {}: {e}", $name))?;
            *s
        }};
    }
    let api = Api {
        init: sym!("PMIx_Init", abi::InitFn),
        finalize: sym!("PMIx_Finalize", abi::FinalizeFn),
        abort: sym!("PMIx_Abort", abi::AbortFn),
        put: sym!("PMIx_Put", abi::PutFn),
        commit: sym!("PMIx_Commit", abi::CommitFn),
        fence: sym!("PMIx_Fence", abi::FenceFn),
        get: sym!("PMIx_Get", abi::GetFn),
        value_destruct: sym!("PMIx_Value_destruct", abi::ValueDestructFn),
        error_string: sym!("PMIx_Error_string", abi::ErrorStringFn),
        version: sym!("PMIx_Get_version", abi::VersionFn),
        spawn: sym!("PMIx_Spawn", spawn::SpawnFn),
        path,
    };
    // Never unloaded: the function pointers above and the library's own
    // progress thread need its code for the rest of the process.
    std::mem::forget(lib);
    Ok(api)
}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api> {
    API.get_or_init(|| load_from(LIBRARY_CANDIDATES))
        .as_ref()
        .map_err(|why| {
            boot(format!(
                "the environment offers PMIx but OpenPMIx's client library could not be loaded \
                 ({why}); install it (Debian: libpmix2) or start the program under a launcher \
                 that serves PMI-1 or PMI-2"
            ))
        })
}

/// Reads a C string of at most `max` bytes from the library: `None` for a
/// null pointer, an error when no NUL comes within `max` bytes or the
/// bytes are not UTF-8.
///
/// # Safety
/// `p` is null or points to memory readable up to its NUL or `max` bytes.
unsafe fn bounded_str(p: *const c_char, max: usize) -> std::result::Result<Option<String>, String> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller guarantees readability up to NUL or `max` bytes;
    // strnlen reads no further.
    let n = unsafe { libc::strnlen(p, max.saturating_add(1)) };
    if n > max {
        return Err(format!("a string longer than {max} bytes"));
    }
    // SAFETY: `n` bytes from `p` were just found readable.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) };
    String::from_utf8(bytes.to_vec())
        .map(Some)
        .map_err(|_| "a string that is not UTF-8".to_string())
}

/// The namespace of a `pmix_proc_t` the library filled: NUL-terminated
/// within the array, not empty, printable ASCII.
fn nspace_of(p: &Proc) -> std::result::Result<String, String> {
    let bytes: Vec<u8> = p.nspace.iter().map(|&c| c as u8).collect();
    let Some(end) = bytes.iter().position(|&b| b == 0) else {
        return Err(format!(
            "a namespace without a NUL within its {} bytes",
            bytes.len()
        ));
    };
    let s = &bytes[..end];
    if s.is_empty() {
        return Err("an empty namespace".into());
    }
    if !s.iter().all(|b| b.is_ascii_graphic()) {
        return Err("a namespace with bytes other than printable ASCII".into());
    }
    Ok(String::from_utf8_lossy(s).into_owned())
}

fn proc_of(nspace: &str, rank: u32) -> Proc {
    let mut p = Proc::zeroed();
    for (d, s) in p.nspace.iter_mut().zip(nspace.bytes().take(abi::MAX_NSLEN)) {
        *d = s as c_char;
    }
    p.rank = rank;
    p
}

impl Api {
    /// `PMIx_Error_string(rc)` (bounded), with the number.
    fn describe(&self, rc: c_int) -> String {
        // SAFETY: PMIx_Error_string returns a static string (or null) for
        // any status; bounded_str reads at most 128 bytes of it.
        let text = unsafe { bounded_str((self.error_string)(rc), 128) }
            .ok()
            .flatten()
            .unwrap_or_else(|| "unknown status".into());
        format!("{text} ({rc})")
    }

    fn version(&self) -> String {
        // SAFETY: PMIx_Get_version returns a static string; bounded read.
        unsafe { bounded_str((self.version)(), 128) }
            .ok()
            .flatten()
            .unwrap_or_else(|| "unknown version".into())
    }

    /// `PMIx_Get` of `key` from `proc`: `Ok(None)` when not found, the
    /// value converted by `convert` otherwise; the library's value is
    /// released in every case.
    fn get_value<T>(
        &self,
        proc_: &Proc,
        key: &CStr,
        optional: bool,
        convert: impl FnOnce(&Value) -> std::result::Result<T, String>,
    ) -> std::result::Result<Option<T>, String> {
        let info = [Info::flag(abi::OPTIONAL, true)];
        let (ip, n) = if optional {
            (info.as_ptr(), 1)
        } else {
            (std::ptr::null(), 0)
        };
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `out` receives a
        // value the library allocated (or stays null).
        let rc = unsafe { (self.get)(proc_, key.as_ptr(), ip, n, &mut out) };
        if rc == abi::ERR_NOT_FOUND {
            self.release(out);
            return Ok(None);
        }
        if rc != abi::SUCCESS {
            self.release(out);
            return Err(self.describe(rc));
        }
        if out.is_null() {
            return Err("success without a value".into());
        }
        // SAFETY: non-null and allocated by the library as a pmix_value_t.
        let r = convert(unsafe { &*out });
        self.release(out);
        r.map(Some)
    }

    /// `PMIX_VALUE_RELEASE`.
    fn release(&self, v: *mut Value) {
        if v.is_null() {
            return;
        }
        // SAFETY: `v` is a value PMIx_Get allocated with malloc; destruct
        // frees what it holds, free the struct (pmix_free is free).
        unsafe {
            (self.value_destruct)(v);
            libc::free(v.cast());
        }
    }
}

/// A string value: type PMIX_STRING, bounded, UTF-8, no NUL.
fn string_value(v: &Value) -> std::result::Result<String, String> {
    if v.type_ != abi::T_STRING {
        return Err(format!(
            "a value of type {} where a string was put",
            v.type_
        ));
    }
    // SAFETY: for PMIX_STRING the union holds `string`, a NUL-terminated
    // string the library owns; bounded_str reads at most MAX_VALUE_LEN.
    match unsafe { bounded_str(v.data.string, MAX_VALUE_LEN) }? {
        Some(s) => Ok(s),
        None => Err("a null string".into()),
    }
}

/// An unsigned number of any integer type the library may use for it.
fn u32_value(v: &Value) -> std::result::Result<u32, String> {
    // SAFETY: each arm reads the union member the type tag names.
    let n: i128 = unsafe {
        match v.type_ {
            abi::T_UINT32 => v.data.uint32.into(),
            abi::T_UINT => v.data.uint.into(),
            abi::T_UINT16 => v.data.uint16.into(),
            abi::T_UINT8 => v.data.uint8.into(),
            abi::T_UINT64 => v.data.uint64.into(),
            abi::T_SIZE => (v.data.size as u64).into(),
            abi::T_INT => v.data.integer.into(),
            abi::T_INT32 => v.data.int32.into(),
            abi::T_INT16 => v.data.int16.into(),
            abi::T_INT8 => v.data.int8.into(),
            abi::T_INT64 => v.data.int64.into(),
            t => return Err(format!("a value of type {t} where a number was expected")),
        }
    };
    u32::try_from(n).map_err(|_| format!("the number {n}, out of range"))
}

type Job = Box<dyn FnOnce() + Send>;

/// The thread every library call runs on, so that each wait is bounded.
struct Worker {
    jobs: mpsc::Sender<Job>,
    /// Set when a call did not come back in time: the worker is still in
    /// the library and every later call fails at once.
    stuck: Option<String>,
}

impl Worker {
    fn start() -> Result<Worker> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("gw-pmix".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .map_err(|e| Error::io("starting the PMIx worker thread", e))?;
        Ok(Worker {
            jobs: tx,
            stuck: None,
        })
    }

    /// Runs `f` on the worker and waits for it at most `timeout`.
    fn run<R: Send + 'static>(
        &mut self,
        what: &str,
        timeout: Duration,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R> {
        if let Some(earlier) = &self.stuck {
            return Err(boot(format!(
                "PMIx {what} not attempted: an earlier {earlier} never returned"
            )));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        if self.jobs.send(job).is_err() {
            return Err(boot(format!("PMIx {what}: the worker thread is gone")));
        }
        match rx.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.stuck = Some(what.to_string());
                Err(boot(format!(
                    "no answer from the PMIx server to {what} within {} s \
                     (GW_PMI_TIMEOUT); it is unreachable or a process of the job did not take part",
                    seconds(timeout)
                )))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(boot(format!("PMIx {what}: the worker thread ended")))
            }
        }
    }
}

/// A duration for messages: whole seconds as such, else one decimal.
fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

/// A PMIx client connected to its server.
pub struct Pmix {
    api: &'static Api,
    nspace: String,
    rank: u32,
    size: u32,
    appnum: i32,
    universe: Option<u32>,
    worker: Worker,
    timeout: Duration,
    uncommitted: bool,
    finalized: bool,
}

impl std::fmt::Debug for Pmix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmix")
            .field("library", &self.api.path)
            .field("nspace", &self.nspace)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("finalized", &self.finalized)
            .finish_non_exhaustive()
    }
}

impl Pmix {
    /// Connects to the PMIx server the environment names. A clear error
    /// when it names none, when the library cannot be loaded, or when the
    /// server does not answer within the reply timeout.
    pub fn init() -> Result<Pmix> {
        if !offered_by(|k| std::env::var(k).ok()) {
            return Err(boot(format!(
                "GW_PMI=pmix, but no PMIx server started this process (none of {} is set); \
                 start it under a PMIx launcher (mpirun.openmpi, srun --mpi=pmix, prterun) \
                 or leave GW_PMI unset",
                ENV_MARKERS.join(", ")
            )));
        }
        let api = api()?;
        let want_rank = super::pmi::env_u32("PMIX_RANK")?;
        // The server's address says most; the namespace if none is set.
        let uri = ENV_MARKERS
            .iter()
            .rev()
            .find_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
            .unwrap_or_default();
        Pmix::start(api, reply_timeout_from_env(), want_rank, &uri)
    }

    /// The start-up through `api`: `PMIx_Init`, checked against
    /// `want_rank` (`PMIX_RANK`), then the job facts. `uri` (the server's
    /// address, for messages) and the timeout come from the environment.
    fn start(
        api: &'static Api,
        timeout: Duration,
        want_rank: Option<u32>,
        uri: &str,
    ) -> Result<Pmix> {
        let mut worker = Worker::start()?;
        let me = worker.run("PMIx_Init", timeout, move || {
            let mut me = Proc::zeroed();
            // SAFETY: `me` is a valid pmix_proc_t to fill; no info.
            let rc = unsafe { (api.init)(&mut me, std::ptr::null_mut(), 0) };
            (rc, me)
        })?;
        let (rc, me) = me;
        if rc != abi::SUCCESS {
            let hint = if rc == abi::ERR_UNREACH {
                ": no PMIx server answers at the address the environment gives (did the launcher end?)"
            } else {
                ""
            };
            return Err(boot(format!(
                "PMIx_Init failed: {}{hint} ({} from {}; {uri})",
                api.describe(rc),
                api.version(),
                api.path
            )));
        }
        let nspace = nspace_of(&me).map_err(|e| boot(format!("PMIx_Init returned {e}")))?;
        let rank = me.rank;
        if rank >= abi::RANK_INVALID {
            return Err(boot(format!(
                "PMIx_Init returned the special rank {rank:#x}"
            )));
        }
        if let Some(r) = want_rank {
            if r != rank {
                return Err(boot(format!(
                    "PMIx_Init gave rank {rank} but PMIX_RANK={r}"
                )));
            }
        }
        let mut p = Pmix {
            api,
            nspace,
            rank,
            size: 0,
            appnum: 0,
            universe: None,
            worker,
            timeout,
            uncommitted: false,
            finalized: false,
        };
        let size = p
            .job_u32(abi::RANK_WILDCARD, abi::JOB_SIZE, false)?
            .ok_or_else(|| boot("the PMIx server gives no job size (pmix.job.size)"))?;
        if size == 0 || rank >= size {
            return Err(boot(format!(
                "inconsistent rank {rank} and job size {size} from the PMIx server"
            )));
        }
        p.size = size;
        // Optional facts: absent or unusable means "not said".
        p.appnum = p
            .job_u32(rank, abi::APPNUM, true)
            .ok()
            .flatten()
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0);
        p.universe = p
            .job_u32(abi::RANK_WILDCARD, abi::UNIV_SIZE, true)
            .ok()
            .flatten()
            .filter(|&u| u >= size);
        Ok(p)
    }

    /// A number the server keeps about the job (`rank` = wildcard) or a
    /// process.
    fn job_u32(&mut self, rank: u32, key: &'static str, optional: bool) -> Result<Option<u32>> {
        let api = self.api;
        let target = proc_of(&self.nspace, rank);
        let k = CString::new(key).map_err(|_| boot("NUL in an attribute name"))?;
        let r = self
            .worker
            .run(&format!("PMIx_Get({key})"), self.timeout, move || {
                api.get_value(&target, &k, optional, u32_value)
            })?;
        r.map_err(|e| boot(format!("PMIx_Get of {key} gave {e}")))
    }

    /// This process's rank in the job (its namespace).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes in the job (`PMIX_JOB_SIZE`).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job's namespace.
    pub fn kvsname(&self) -> &str {
        &self.nspace
    }

    /// Application number (`PMIX_APPNUM`); 0 when the server does not say.
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// Slots in the session (`PMIX_UNIV_SIZE`), if the server says.
    pub fn universe_size(&self) -> Option<u32> {
        self.universe
    }

    /// Where the library was loaded from.
    pub fn library(&self) -> &'static str {
        self.api.path
    }

    /// Longest key [`Pmix::put`]/[`Pmix::get`] accept, in bytes.
    pub fn max_key_len(&self) -> usize {
        MAX_KEY_LEN
    }

    /// Longest value [`Pmix::put`] accepts, in bytes.
    pub fn max_value_len(&self) -> usize {
        MAX_VALUE_LEN
    }

    fn check_live(&self, what: &str) -> Result<()> {
        if self.finalized {
            return Err(boot(format!("PMI {what} after finalize")));
        }
        Ok(())
    }

    fn key(&self, key: &str) -> Result<CString> {
        check_key(key)?;
        CString::new(key).map_err(|_| boot(format!("PMIx key {key:?} contains a NUL")))
    }

    /// Publishes `key=value` under this process; others see it after the
    /// next [`Pmix::barrier`].
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.check_live("put")?;
        let k = self.key(key)?;
        if value.len() > MAX_VALUE_LEN {
            return Err(boot(format!(
                "PMIx value for key {key:?} is {} bytes, at most {MAX_VALUE_LEN} are allowed",
                value.len()
            )));
        }
        let v = CString::new(value)
            .map_err(|_| boot(format!("PMIx value for key {key:?} contains a NUL")))?;
        let api = self.api;
        let rc = self.worker.run("PMIx_Put", self.timeout, move || {
            let mut val = Value {
                type_: abi::T_STRING,
                data: abi::ValueData {
                    string: v.as_ptr().cast_mut(),
                },
            };
            // SAFETY: key and value are valid for the call; PMIx_Put copies
            // the value (its string included) before returning.
            unsafe { (api.put)(abi::GLOBAL, k.as_ptr(), &mut val) }
        })?;
        if rc != abi::SUCCESS {
            return Err(boot(format!(
                "PMIx_Put of {key:?} failed: {}",
                self.api.describe(rc)
            )));
        }
        self.uncommitted = true;
        Ok(())
    }

    /// `PMIx_Commit`: hands the puts to the local server.
    pub fn commit(&mut self) -> Result<()> {
        self.check_live("commit")?;
        if !self.uncommitted {
            return Ok(());
        }
        let api = self.api;
        // SAFETY: no arguments.
        let rc = self
            .worker
            .run("PMIx_Commit", self.timeout, move || unsafe {
                (api.commit)()
            })?;
        if rc != abi::SUCCESS {
            return Err(boot(format!(
                "PMIx_Commit failed: {}",
                self.api.describe(rc)
            )));
        }
        self.uncommitted = false;
        Ok(())
    }

    /// Commits what is pending, then `PMIx_Fence` over the whole namespace
    /// collecting the data: afterwards every process's puts are readable.
    pub fn barrier(&mut self) -> Result<()> {
        self.check_live("barrier")?;
        self.commit()?;
        let api = self.api;
        let all = proc_of(&self.nspace, abi::RANK_WILDCARD);
        // The server may enforce a timeout of its own too; whole seconds,
        // at least one.
        let secs = c_int::try_from(self.timeout.as_secs().max(1)).unwrap_or(c_int::MAX);
        let rc = self.worker.run("PMIx_Fence", self.timeout, move || {
            let info = [
                Info::flag(abi::COLLECT_DATA, true),
                Info::int(abi::TIMEOUT, secs),
            ];
            // SAFETY: one proc and two infos, valid for the call.
            unsafe { (api.fence)(&all, 1, info.as_ptr(), info.len()) }
        })?;
        if rc != abi::SUCCESS {
            let hint = if rc == abi::ERR_TIMEOUT {
                " (a process of the job did not reach the barrier within GW_PMI_TIMEOUT)"
            } else {
                ""
            };
            return Err(boot(format!(
                "PMIx_Fence of namespace {} failed: {}{hint}",
                self.nspace,
                self.api.describe(rc)
            )));
        }
        Ok(())
    }

    /// Looks `key` up as put by rank `owner`; `None` if it did not put it
    /// (before the last barrier).
    pub fn get_from(&mut self, owner: u32, key: &str) -> Result<Option<String>> {
        self.check_live("get")?;
        let k = self.key(key)?;
        if owner >= self.size {
            return Err(boot(format!(
                "PMIx get of {key:?} from rank {owner}, but the job has {} ranks",
                self.size
            )));
        }
        let api = self.api;
        let target = proc_of(&self.nspace, owner);
        let r = self.worker.run("PMIx_Get", self.timeout, move || {
            api.get_value(&target, &k, true, string_value)
        })?;
        r.map_err(|e| boot(format!("PMIx_Get of {key:?} from rank {owner} gave {e}")))
    }

    /// Looks `key` up whoever put it: this rank first, then every rank in
    /// order (one local look-up each; callers that know the owner use
    /// [`Pmix::get_from`]).
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        let me = self.rank;
        for owner in std::iter::once(me).chain((0..self.size).filter(|&r| r != me)) {
            if let Some(v) = self.get_from(owner, key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// `PMIx_Finalize`. Further calls (other than `finalize`) are errors.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let api = self.api;
        // SAFETY: no info.
        let rc = self
            .worker
            .run("PMIx_Finalize", self.timeout, move || unsafe {
                (api.finalize)(std::ptr::null(), 0)
            })?;
        if rc != abi::SUCCESS {
            return Err(boot(format!(
                "PMIx_Finalize failed: {}",
                self.api.describe(rc)
            )));
        }
        Ok(())
    }

    /// `PMIx_Abort` of the whole namespace with exit code `code`; the
    /// caller exits right after.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        let msg = CString::new(abort_text(msg)).map_err(|_| boot("NUL in abort message"))?;
        let api = self.api;
        // SAFETY: a valid message; NULL procs = the caller's namespace.
        let rc = self
            .worker
            .run("PMIx_Abort", self.timeout, move || unsafe {
                (api.abort)(code, msg.as_ptr(), std::ptr::null_mut(), 0)
            })?;
        if rc != abi::SUCCESS {
            return Err(boot(format!(
                "PMIx_Abort failed: {}",
                self.api.describe(rc)
            )));
        }
        Ok(())
    }
}

/// Keys the client accepts: not empty, at most `PMIX_MAX_KEYLEN` bytes, no
/// NUL or control characters, and not in the `pmix` namespace the standard
/// reserves for its attributes (a put there could shadow job facts).
fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.chars().any(|c| c.is_control()) {
        return Err(boot(format!(
            "PMIx key {key:?} is empty or contains a control character"
        )));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(boot(format!(
            "PMIx key {key:?} is {} bytes, at most {MAX_KEY_LEN} are allowed",
            key.len()
        )));
    }
    if key.starts_with("pmix") {
        return Err(boot(format!(
            "PMIx key {key:?} is in the namespace PMIx reserves for its own attributes"
        )));
    }
    Ok(())
}

/// The abort message: control characters become spaces, at most
/// [`MAX_ABORT_MSG`] bytes, cut on a character boundary.
fn abort_text(msg: &str) -> String {
    let mut text: String = msg
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    while text.len() > MAX_ABORT_MSG {
        text.pop();
    }
    text
}

#[path = "pmix_spawn.rs"]
mod spawn;

pub use spawn::preput_env_name;

#[cfg(test)]
#[path = "pmix_tests.rs"]
mod tests;
