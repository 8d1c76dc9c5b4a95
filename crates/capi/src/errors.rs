//! Error reporting: error handlers, error strings, unsupported functions.

use crate::abi::*;
use crate::handles::{self, Errh, ERRHS};
use crate::{cstr, put, put_str};
use gridwire_mpi::{class, err, MpiError, Result};
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// User-added error classes/codes (`MPI_Add_error_*`): code -> (class, string).
static USER_ERRORS: Mutex<Option<HashMap<c_int, (c_int, String)>>> = Mutex::new(None);
/// User classes and codes come after `MPI_ERR_LASTCODE`.
static LAST_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(class::LASTCODE);

pub fn last_used_code() -> c_int {
    LAST_CODE.load(Ordering::Relaxed)
}

fn rank_str() -> String {
    handles::MPI
        .get()
        .map_or("?".into(), |m| m.world.rank.to_string())
}

/// The error handler of the object `comm` (or of `MPI_COMM_WORLD` when the handle is unusable).
fn handler_of(comm: Handle) -> Errh {
    let Some(m) = handles::MPI.get() else {
        return Errh::Fatal;
    };
    let c = handles::comm(comm).unwrap_or_else(|_| m.world.clone());
    match c.errhandler.load(Ordering::Relaxed) {
        0 => Errh::Fatal,
        h => handles::errh(h).unwrap_or(Errh::Fatal),
    }
}

/// Reports an error of function `name` on communicator `comm`: runs its
/// error handler and returns the code to give back to the caller.
pub fn fail(name: &str, comm: Handle, e: MpiError) -> c_int {
    let code = e.class;
    match handler_of(comm) {
        Errh::Return => code,
        Errh::User(f) => {
            let mut h = if handles::comm(comm).is_ok() {
                comm
            } else {
                MPI_COMM_WORLD
            };
            let mut c = code;
            // SAFETY: a function the program registered with MPI_Comm_create_errhandler,
            // called with the (MPI_Comm *, int *) arguments the standard defines.
            unsafe { f(&mut h, &mut c) };
            code
        }
        Errh::Fatal | Errh::Abort => {
            let msg = format!(
                "gridwire MPI: rank {}: {name}: {} ({}): {}",
                rank_str(),
                class::name(code),
                class::describe(code),
                e.msg
            );
            gridwire_core::say!("{msg}");
            match handles::MPI.get() {
                Some(m) => m.ctx().abort(code.max(1), &msg),
                None => std::process::exit(code.max(1)),
            }
        }
    }
}

/// Runs the body of the C function `name`, so that no panic unwinds into C.
///
/// Why a `catch_unwind` on every call when the rule is that no input can
/// reach a panic: it is the last line behind that rule. A bug then costs
/// the program an `MPI_ERR_INTERN` through its error handler (fatal by
/// default, with the message), not an abort by the runtime without one.
/// It costs no instruction on the path that does not panic (unwinding
/// uses tables, not code on the way): measured with `bench/mpi-ab.sh`,
/// see the commit that added it.
#[inline(always)]
pub fn no_unwind<R: OnPanic>(name: &'static str, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => R::on_panic(name, &panic_text(&*p)),
    }
}

#[cold]
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// What a C function returns after its body panicked.
pub trait OnPanic {
    fn on_panic(name: &str, what: &str) -> Self;
}

impl OnPanic for c_int {
    #[cold]
    fn on_panic(name: &str, what: &str) -> c_int {
        let e = err(
            class::INTERN,
            format!("internal error (a bug in gridwire, please report it): {what}"),
        );
        fail(name, MPI_COMM_WORLD, e)
    }
}

/// `MPI_Wtime`, `MPI_Aint_add`, handle conversions: no error code to return.
fn abort_after_panic(name: &str, what: &str) -> ! {
    gridwire_core::say!(
        "gridwire MPI: rank {}: {name}: internal error (a bug in gridwire): {what}",
        rank_str()
    );
    std::process::abort()
}

impl OnPanic for f64 {
    #[cold]
    fn on_panic(name: &str, what: &str) -> f64 {
        abort_after_panic(name, what)
    }
}

impl OnPanic for isize {
    #[cold]
    fn on_panic(name: &str, what: &str) -> isize {
        abort_after_panic(name, what)
    }
}

/// Handle conversions (`MPI_Comm_f2c`, ...).
impl OnPanic for usize {
    #[cold]
    fn on_panic(name: &str, what: &str) -> usize {
        abort_after_panic(name, what)
    }
}

/// Runs `f`; on error, reports it on `comm` as `name`.
#[inline]
pub fn run(name: &str, comm: Handle, f: impl FnOnce() -> Result<()>) -> c_int {
    match f() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => fail(name, comm, e),
    }
}

/// [`run`] for the calls that complete requests (`MPI_Wait`, `MPI_Test`,
/// ...): the communicator to report an error on is known only once the
/// failed request is (`f` sets it; `MPI_COMM_WORLD` until then).
#[inline]
pub fn run_on_request(name: &str, f: impl FnOnce(&mut Handle) -> Result<()>) -> c_int {
    let mut comm = MPI_COMM_WORLD;
    match f(&mut comm) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => fail(name, comm, e),
    }
}

/// The body of every declared-but-unsupported function.
pub fn unsupported(name: &str) -> c_int {
    fail(
        name,
        MPI_COMM_WORLD,
        err(
            class::UNSUPPORTED_OPERATION,
            format!("{name} is declared by gridwire's mpi.h but not implemented yet"),
        ),
    )
}

fn code_class(code: c_int) -> Option<c_int> {
    if class::is_predefined(code) {
        return Some(code);
    }
    USER_ERRORS
        .lock()
        .unwrap()
        .as_ref()?
        .get(&code)
        .map(|(c, _)| *c)
}

mpi_fn!(fn MPI_Error_class / PMPI_Error_class(code: c_int, cls: *mut c_int) -> c_int {
    run("MPI_Error_class", MPI_COMM_WORLD, || {
        let c = code_class(code).ok_or_else(|| err(class::ARG, format!("{code} is not a valid error code")))?;
        // SAFETY: output argument.
        unsafe { put(cls, c) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Error_string / PMPI_Error_string(code: c_int, s: *mut c_char, len: *mut c_int) -> c_int {
    run("MPI_Error_string", MPI_COMM_WORLD, || {
        let text = match USER_ERRORS.lock().unwrap().as_ref().and_then(|m| m.get(&code).cloned()) {
            Some((_, t)) => t,
            None if class::is_predefined(code) => format!("{}: {}", class::name(code), class::describe(code)),
            None => return Err(err(class::ARG, format!("{code} is not a valid error code"))),
        };
        // SAFETY: `s` holds MPI_MAX_ERROR_STRING bytes by the standard.
        unsafe { put_str(&text, s, MPI_MAX_ERROR_STRING, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Add_error_class / PMPI_Add_error_class(cls: *mut c_int) -> c_int {
    run("MPI_Add_error_class", MPI_COMM_WORLD, || {
        let c = LAST_CODE.fetch_add(1, Ordering::Relaxed) + 1;
        USER_ERRORS.lock().unwrap().get_or_insert_with(HashMap::new).insert(c, (c, String::new()));
        // SAFETY: output argument.
        unsafe { put(cls, c) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Add_error_code / PMPI_Add_error_code(cls: c_int, code: *mut c_int) -> c_int {
    run("MPI_Add_error_code", MPI_COMM_WORLD, || {
        if code_class(cls).is_none() {
            return Err(err(class::ARG, format!("{cls} is not a valid error class")));
        }
        let c = LAST_CODE.fetch_add(1, Ordering::Relaxed) + 1;
        USER_ERRORS.lock().unwrap().get_or_insert_with(HashMap::new).insert(c, (cls, String::new()));
        // SAFETY: output argument.
        unsafe { put(code, c) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Add_error_string / PMPI_Add_error_string(code: c_int, s: *const c_char) -> c_int {
    run("MPI_Add_error_string", MPI_COMM_WORLD, || {
        // SAFETY: a NUL-terminated string argument.
        let text = unsafe { cstr(s) };
        let mut g = USER_ERRORS.lock().unwrap();
        let m = g.get_or_insert_with(HashMap::new);
        match m.get_mut(&code) {
            Some(e) => e.1 = text,
            None => return Err(err(class::ARG, format!("{code} was not added with MPI_Add_error_code/class"))),
        }
        Ok(())
    })
});

pub(crate) type ErrFn = unsafe extern "C" fn(*mut Handle, *mut c_int, ...);

mpi_fn!(fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<ErrFn>, eh: *mut MPI_Errhandler) -> c_int {
    run("MPI_Comm_create_errhandler", MPI_COMM_WORLD, || {
        let f = f.ok_or_else(|| err(class::ARG, "the error handler function is NULL"))?;
        // SAFETY: output argument.
        unsafe { put(eh, ERRHS.insert(Errh::User(f))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: MPI_Comm, eh: MPI_Errhandler) -> c_int {
    run("MPI_Comm_set_errhandler", comm, || {
        let c = handles::comm(comm)?;
        handles::errh(eh)?;
        c.errhandler.store(eh, Ordering::Relaxed);
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: MPI_Comm, eh: *mut MPI_Errhandler) -> c_int {
    run("MPI_Comm_get_errhandler", comm, || {
        let c = handles::comm(comm)?;
        let h = match c.errhandler.load(Ordering::Relaxed) {
            0 => MPI_ERRORS_ARE_FATAL,
            h => h,
        };
        // SAFETY: output argument.
        unsafe { put(eh, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut MPI_Errhandler) -> c_int {
    run("MPI_Errhandler_free", MPI_COMM_WORLD, || {
        if eh.is_null() {
            return Err(err(class::ARG, "errhandler pointer is NULL"));
        }
        // SAFETY: non-null in/out argument.
        let h = unsafe { *eh };
        if h >= 0x1000 {
            // Communicators that still use it keep a copy of the handler value.
            handles::errh(h)?;
        }
        // SAFETY: as above.
        unsafe { *eh = MPI_ERRHANDLER_NULL };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: MPI_Comm, code: c_int) -> c_int {
    let _ = fail("MPI_Comm_call_errhandler", comm, MpiError::new(code, "called by the program"));
    MPI_SUCCESS
});

/// `MPI_Remove_error_class` (`class = true`) and `MPI_Remove_error_code`:
/// only user-added ones, a class only without codes, and neither while it
/// still has a string (MPI 4.1, 8.5).
fn remove_user(name: &str, code: c_int, is_class: bool) -> c_int {
    run(name, MPI_COMM_WORLD, || {
        let mut g = USER_ERRORS.lock().unwrap();
        let m = g.get_or_insert_with(HashMap::new);
        let what = if is_class { "class" } else { "code" };
        match m.get(&code) {
            Some(&(cls, _)) if (cls == code) != is_class => {
                return Err(err(
                    class::ARG,
                    format!("{code} is not a user-added error {what}"),
                ))
            }
            Some((_, s)) if !s.is_empty() => {
                return Err(err(
                    class::ARG,
                    format!(
                        "error {what} {code} still has a string (MPI_Remove_error_string first)"
                    ),
                ))
            }
            Some(_) => {}
            None => {
                return Err(err(
                    class::ARG,
                    format!("{code} is not a user-added error {what}"),
                ))
            }
        }
        if is_class && m.iter().any(|(&k, &(cls, _))| cls == code && k != code) {
            return Err(err(
                class::ARG,
                format!("error class {code} still has error codes (remove them first)"),
            ));
        }
        m.remove(&code);
        Ok(())
    })
}

mpi_fn!(fn MPI_Remove_error_class / PMPI_Remove_error_class(c: c_int) -> c_int { remove_user("MPI_Remove_error_class", c, true) });
mpi_fn!(fn MPI_Remove_error_code / PMPI_Remove_error_code(c: c_int) -> c_int { remove_user("MPI_Remove_error_code", c, false) });
mpi_fn!(fn MPI_Remove_error_string / PMPI_Remove_error_string(code: c_int) -> c_int {
    run("MPI_Remove_error_string", MPI_COMM_WORLD, || {
        let mut g = USER_ERRORS.lock().unwrap();
        match g.as_mut().and_then(|m| m.get_mut(&code)) {
            Some(e) => {
                e.1.clear();
                Ok(())
            }
            None => Err(err(class::ARG, format!("{code} is not a user-added error code"))),
        }
    })
});
