//! Environment: init/finalize, threads, time, versions, handle conversions, status helpers.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, mpi, Table, MPI};
use crate::{arr, put, put_str, Void};
use gridwire_mpi::{class, err, Mpi};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static FINALIZED: AtomicBool = AtomicBool::new(false);
/// Set on entry to `MPI_Finalize`; `FINALIZED` only once it has completed.
static FINALIZE_CALLED: AtomicBool = AtomicBool::new(false);
static THREAD_LEVEL: AtomicI32 = AtomicI32::new(MPI_THREAD_SINGLE);
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

fn init(required: c_int) -> gridwire_mpi::Result<c_int> {
    if MPI.get().is_some() || FINALIZED.load(Ordering::Relaxed) {
        return Err(err(class::OTHER, "MPI_Init was already called"));
    }
    let m = Mpi::init()?;
    m.engine.set_threaded(required >= MPI_THREAD_MULTIPLE);
    // SAFETY: below MPI_THREAD_MULTIPLE the program orders its MPI calls
    // (one thread at a time, each after the previous one), and only MPI
    // calls of the program use the request table: the library's own threads
    // (RMA progress, nonblocking collectives) live in gridwire-mpi, which
    // never sees C handles. No other thread uses it during MPI_Init.
    unsafe { handles::REQS.set_serial(required < MPI_THREAD_MULTIPLE) };
    if MPI.set(m).is_err() {
        return Err(err(class::OTHER, "MPI_Init was called twice at once"));
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    // Everything is thread-safe: grant what was asked, up to MULTIPLE.
    let level = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE);
    THREAD_LEVEL.store(level, Ordering::Relaxed);
    Ok(level)
}

mpi_fn!(fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    run("MPI_Init", MPI_COMM_WORLD, || init(MPI_THREAD_SINGLE).map(|_| ()))
});

mpi_fn!(fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) -> c_int {
    run("MPI_Init_thread", MPI_COMM_WORLD, || {
        let l = init(required)?;
        // SAFETY: output argument.
        unsafe { put(provided, l) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Finalize / PMPI_Finalize() -> c_int {
    run("MPI_Finalize", MPI_COMM_WORLD, || {
        let m = mpi()?;
        if FINALIZE_CALLED.swap(true, Ordering::AcqRel) {
            return Err(err(class::OTHER, "MPI_Finalize was already called"));
        }
        // First MPI_COMM_SELF's attributes go, last set first, with MPI still
        // fully usable: MPI_Finalized says false inside their delete callbacks
        // (MPI-4.1 §11.2.4, a hook for libraries to clean up).
        crate::attr::delete_all_on_self();
        let done = m.finalize();
        // "true if MPI_FINALIZE has completed" (MPI-4.1 §11.2.1).
        FINALIZED.store(true, Ordering::Release);
        done
    })
});

mpi_fn!(fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { put(flag, MPI.get().is_some() as c_int) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { put(flag, FINALIZED.load(Ordering::Relaxed) as c_int) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { put(provided, THREAD_LEVEL.load(Ordering::Relaxed)) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
    let main = MAIN_THREAD.get().is_some_and(|t| *t == std::thread::current().id());
    // SAFETY: output argument.
    unsafe { put(flag, main as c_int) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Abort / PMPI_Abort(comm: MPI_Comm, code: c_int) -> c_int {
    let rank = MPI.get().map_or(0, |m| m.world.rank);
    let msg = format!("MPI_Abort called by rank {rank} with error code {code}");
    gridwire_core::say!("gridwire MPI: {msg}");
    let _ = comm;
    match MPI.get() {
        Some(m) => m.ctx().abort(code, &msg),
        None => std::process::exit(code),
    }
});

mpi_fn!(fn MPI_Wtime / PMPI_Wtime() -> f64 {
    static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
});

mpi_fn!(fn MPI_Wtick / PMPI_Wtick() -> f64 { 1e-9 });

mpi_fn!(fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) -> c_int {
    run("MPI_Get_processor_name", MPI_COMM_WORLD, || {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
        unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let host = String::from_utf8_lossy(&buf[..n]).into_owned();
        // SAFETY: `name` holds MPI_MAX_PROCESSOR_NAME bytes by the standard.
        unsafe { put_str(&host, name, MPI_MAX_PROCESSOR_NAME, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: output arguments.
    unsafe {
        put(version, 5);
        put(subversion, 0);
    }
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Get_library_version / PMPI_Get_library_version(s: *mut c_char, len: *mut c_int) -> c_int {
    let v = format!("gridwire MPI {} (MPI 5.0 standard ABI 1.0, multimethod runtime)", env!("CARGO_PKG_VERSION"));
    // SAFETY: `s` holds MPI_MAX_LIBRARY_VERSION_STRING bytes by the standard.
    unsafe { put_str(&v, s, MPI_MAX_LIBRARY_VERSION_STRING, len) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Abi_get_version / PMPI_Abi_get_version(major: *mut c_int, minor: *mut c_int) -> c_int {
    // SAFETY: output arguments.
    unsafe {
        put(major, 1);
        put(minor, 0);
    }
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Abi_get_info / PMPI_Abi_get_info(info: *mut MPI_Info) -> c_int {
    run("MPI_Abi_get_info", MPI_COMM_WORLD, || {
        let mut i = gridwire_mpi::info::Info::default();
        i.set("mpi_aint_size", &std::mem::size_of::<isize>().to_string())?;
        i.set("mpi_count_size", "8")?;
        i.set("mpi_offset_size", "8")?;
        let h = handles::INFOS.insert(std::sync::Arc::new(std::sync::Mutex::new(i)));
        // SAFETY: output argument.
        unsafe { put(info, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Aint_add / PMPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint { base.wrapping_add(disp) });
mpi_fn!(fn MPI_Aint_diff / PMPI_Aint_diff(a: MPI_Aint, b: MPI_Aint) -> MPI_Aint { a.wrapping_sub(b) });

mpi_fn!(fn MPI_Get_address / PMPI_Get_address(location: *const Void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: output argument.
    unsafe { put(address, location as MPI_Aint) };
    MPI_SUCCESS
});

// ---- status helpers ----------------------------------------------------------

fn status_bytes(s: &MPI_Status) -> usize {
    (s.internal[0] as u32 as usize) | ((s.internal[1] as u32 as usize) << 32)
}

unsafe fn count_of(
    status: *const MPI_Status,
    dt: MPI_Datatype,
    elements: bool,
) -> gridwire_mpi::Result<i64> {
    if status.is_null() {
        return Err(err(
            class::ARG,
            "status is NULL (MPI_STATUS_IGNORE cannot be queried)",
        ));
    }
    // SAFETY: a non-null status the program got from MPI.
    let s = unsafe { &*status };
    let t = handles::dtype(dt)?;
    let bytes = status_bytes(s);
    if elements {
        return Ok(t
            .elements_in(bytes)
            .map_or(MPI_UNDEFINED as i64, |n| n as i64));
    }
    if t.size == 0 {
        return Ok(0);
    }
    Ok(if bytes.is_multiple_of(t.size) {
        (bytes / t.size) as i64
    } else {
        MPI_UNDEFINED as i64
    })
}

mpi_fn!(fn MPI_Get_count / PMPI_Get_count(status: *const MPI_Status, dt: MPI_Datatype, count: *mut c_int) -> c_int {
    run("MPI_Get_count", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        let n = unsafe { count_of(status, dt, false) }?;
        // A count an int cannot hold is MPI_UNDEFINED (MPI 4.1 §3.2.5), not a clamped one.
        // SAFETY: output argument.
        unsafe { put(count, c_int::try_from(n).unwrap_or(MPI_UNDEFINED)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_count_c / PMPI_Get_count_c(status: *const MPI_Status, dt: MPI_Datatype, count: *mut MPI_Count) -> c_int {
    run("MPI_Get_count_c", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        let n = unsafe { count_of(status, dt, false) }?;
        // SAFETY: output argument.
        unsafe { put(count, n) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_elements / PMPI_Get_elements(status: *const MPI_Status, dt: MPI_Datatype, count: *mut c_int) -> c_int {
    run("MPI_Get_elements", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        let n = unsafe { count_of(status, dt, true) }?;
        // A count an int cannot hold is MPI_UNDEFINED (MPI 4.1 §3.2.5), not a clamped one.
        // SAFETY: output argument.
        unsafe { put(count, c_int::try_from(n).unwrap_or(MPI_UNDEFINED)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MPI_Status, dt: MPI_Datatype, count: *mut MPI_Count) -> c_int {
    run("MPI_Get_elements_x", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        let n = unsafe { count_of(status, dt, true) }?;
        // SAFETY: output argument.
        unsafe { put(count, n) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MPI_Status, dt: MPI_Datatype, count: *mut MPI_Count) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Get_elements_x(status, dt, count) }
});

mpi_fn!(fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MPI_Status, dt: MPI_Datatype, count: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Status_set_elements_x(status, dt, count as MPI_Count) }
});

mpi_fn!(fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MPI_Status, dt: MPI_Datatype, count: MPI_Count) -> c_int {
    run("MPI_Status_set_elements_x", MPI_COMM_WORLD, || {
        if status.is_null() {
            return Err(err(class::ARG, "status is NULL"));
        }
        let t = handles::dtype(dt)?;
        let bsz = t.basic.map_or(t.size, |_| t.size / t.nbasic.max(1));
        let b = (count.max(0) as u64) * bsz as u64;
        // SAFETY: a non-null status owned by the program.
        unsafe {
            (*status).internal[0] = b as u32 as i32;
            (*status).internal[1] = (b >> 32) as u32 as i32;
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Status_set_elements_c / PMPI_Status_set_elements_c(status: *mut MPI_Status, dt: MPI_Datatype, count: MPI_Count) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Status_set_elements_x(status, dt, count) }
});

mpi_fn!(fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    if !status.is_null() {
        // SAFETY: a non-null status owned by the program.
        unsafe { (*status).internal[2] = (flag != 0) as c_int };
    }
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    run("MPI_Test_cancelled", MPI_COMM_WORLD, || {
        if status.is_null() {
            return Err(err(class::ARG, "status is NULL"));
        }
        // SAFETY: a non-null status from MPI; `flag` an output argument.
        unsafe { put(flag, (*status).internal[2]) };
        Ok(())
    })
});

macro_rules! status_field {
    ($get:ident, $pget:ident, $set:ident, $pset:ident, $f:ident) => {
        mpi_fn!(fn $get / $pget(status: *mut MPI_Status, v: *mut c_int) -> c_int {
            if status.is_null() {
                return crate::errors::fail(stringify!($get), MPI_COMM_WORLD, err(class::ARG, "status is NULL"));
            }
            // SAFETY: non-null status and output argument.
            unsafe { put(v, (*status).$f) };
            MPI_SUCCESS
        });
        mpi_fn!(fn $set / $pset(status: *mut MPI_Status, v: c_int) -> c_int {
            if status.is_null() {
                return crate::errors::fail(stringify!($set), MPI_COMM_WORLD, err(class::ARG, "status is NULL"));
            }
            // SAFETY: non-null status owned by the program.
            unsafe { (*status).$f = v };
            MPI_SUCCESS
        });
    };
}
status_field!(
    MPI_Status_get_source,
    PMPI_Status_get_source,
    MPI_Status_set_source,
    PMPI_Status_set_source,
    MPI_SOURCE
);
status_field!(
    MPI_Status_get_tag,
    PMPI_Status_get_tag,
    MPI_Status_set_tag,
    PMPI_Status_set_tag,
    MPI_TAG
);
status_field!(
    MPI_Status_get_error,
    PMPI_Status_get_error,
    MPI_Status_set_error,
    PMPI_Status_set_error,
    MPI_ERROR
);

mpi_fn!(fn MPI_Status_c2f / PMPI_Status_c2f(c: *const MPI_Status, f: *mut MPI_Fint) -> c_int {
    if c.is_null() || f.is_null() {
        return crate::errors::fail("MPI_Status_c2f", MPI_COMM_WORLD, err(class::ARG, "NULL status"));
    }
    // SAFETY: both point to 8 ints (MPI_F_STATUS_SIZE == 8 in the standard ABI).
    unsafe { std::ptr::copy_nonoverlapping(c as *const c_int, f, 8) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Status_f2c / PMPI_Status_f2c(f: *const MPI_Fint, c: *mut MPI_Status) -> c_int {
    if c.is_null() || f.is_null() {
        return crate::errors::fail("MPI_Status_f2c", MPI_COMM_WORLD, err(class::ARG, "NULL status"));
    }
    // SAFETY: both point to 8 ints (MPI_F_STATUS_SIZE == 8 in the standard ABI).
    unsafe { std::ptr::copy_nonoverlapping(f, c as *mut c_int, 8) };
    MPI_SUCCESS
});

// ---- handle <-> int conversions (MPI 5.0 ABI `toint`/`fromint`, and `c2f`/`f2c`) ----

macro_rules! conv {
    ($toint:ident, $ptoint:ident, $fromint:ident, $pfromint:ident, $c2f:ident, $pc2f:ident, $f2c:ident, $pf2c:ident, $table:expr) => {
        mpi_fn!(fn $toint / $ptoint(h: Handle) -> c_int { Table::<()>::to_int(h) });
        mpi_fn!(fn $fromint / $pfromint(v: c_int) -> Handle { $table(v) });
        mpi_fn!(fn $c2f / $pc2f(h: Handle) -> MPI_Fint { Table::<()>::to_int(h) });
        mpi_fn!(fn $f2c / $pf2c(v: MPI_Fint) -> Handle { $table(v) });
    };
}
conv!(
    MPI_Comm_toint,
    PMPI_Comm_toint,
    MPI_Comm_fromint,
    PMPI_Comm_fromint,
    MPI_Comm_c2f,
    PMPI_Comm_c2f,
    MPI_Comm_f2c,
    PMPI_Comm_f2c,
    |v| handles::COMMS.from_int(v)
);
conv!(
    MPI_Type_toint,
    PMPI_Type_toint,
    MPI_Type_fromint,
    PMPI_Type_fromint,
    MPI_Type_c2f,
    PMPI_Type_c2f,
    MPI_Type_f2c,
    PMPI_Type_f2c,
    |v| handles::TYPES.from_int(v)
);
conv!(
    MPI_Group_toint,
    PMPI_Group_toint,
    MPI_Group_fromint,
    PMPI_Group_fromint,
    MPI_Group_c2f,
    PMPI_Group_c2f,
    MPI_Group_f2c,
    PMPI_Group_f2c,
    |v| handles::GROUPS.from_int(v)
);
conv!(
    MPI_Op_toint,
    PMPI_Op_toint,
    MPI_Op_fromint,
    PMPI_Op_fromint,
    MPI_Op_c2f,
    PMPI_Op_c2f,
    MPI_Op_f2c,
    PMPI_Op_f2c,
    |v| handles::OPS.from_int(v)
);
conv!(
    MPI_Request_toint,
    PMPI_Request_toint,
    MPI_Request_fromint,
    PMPI_Request_fromint,
    MPI_Request_c2f,
    PMPI_Request_c2f,
    MPI_Request_f2c,
    PMPI_Request_f2c,
    |v| handles::REQS.from_int(v)
);
conv!(
    MPI_Errhandler_toint,
    PMPI_Errhandler_toint,
    MPI_Errhandler_fromint,
    PMPI_Errhandler_fromint,
    MPI_Errhandler_c2f,
    PMPI_Errhandler_c2f,
    MPI_Errhandler_f2c,
    PMPI_Errhandler_f2c,
    |v| handles::ERRHS.from_int(v)
);
conv!(
    MPI_Info_toint,
    PMPI_Info_toint,
    MPI_Info_fromint,
    PMPI_Info_fromint,
    MPI_Info_c2f,
    PMPI_Info_c2f,
    MPI_Info_f2c,
    PMPI_Info_f2c,
    |v| handles::INFOS.from_int(v)
);
conv!(
    MPI_Message_toint,
    PMPI_Message_toint,
    MPI_Message_fromint,
    PMPI_Message_fromint,
    MPI_Message_c2f,
    PMPI_Message_c2f,
    MPI_Message_f2c,
    PMPI_Message_f2c,
    |v| handles::MSGS.from_int(v)
);
conv!(
    MPI_Win_toint,
    PMPI_Win_toint,
    MPI_Win_fromint,
    PMPI_Win_fromint,
    MPI_Win_c2f,
    PMPI_Win_c2f,
    MPI_Win_f2c,
    PMPI_Win_f2c,
    |v| crate::rma::WINS.from_int(v)
);
conv!(
    MPI_File_toint,
    PMPI_File_toint,
    MPI_File_fromint,
    PMPI_File_fromint,
    MPI_File_c2f,
    PMPI_File_c2f,
    MPI_File_f2c,
    PMPI_File_f2c,
    |v: c_int| v as u32 as Handle
);
conv!(
    MPI_Session_toint,
    PMPI_Session_toint,
    MPI_Session_fromint,
    PMPI_Session_fromint,
    MPI_Session_c2f,
    PMPI_Session_c2f,
    MPI_Session_f2c,
    PMPI_Session_f2c,
    |v: c_int| v as u32 as Handle
);

pub fn _use(_: &[c_int]) {
    let _ = arr::<c_int>;
}
