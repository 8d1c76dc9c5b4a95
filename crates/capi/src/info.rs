//! Info objects.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{info, INFOS};
use crate::{cstr, put, put_str};
use gridwire_mpi::info::Info;
use gridwire_mpi::{class, err};
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};

mpi_fn!(fn MPI_Info_create / PMPI_Info_create(out: *mut MPI_Info) -> c_int {
    run("MPI_Info_create", MPI_COMM_WORLD, || {
        if out.is_null() {
            return Err(err(class::ARG, "info pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *out = INFOS.insert(Arc::new(Mutex::new(Info::default()))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_set / PMPI_Info_set(i: MPI_Info, key: *const c_char, val: *const c_char) -> c_int {
    run("MPI_Info_set", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        // SAFETY: NUL-terminated string arguments.
        let (k, v) = unsafe { (cstr(key), cstr(val)) };
        let r = inf.lock().unwrap().set(&k, &v);
        r
    })
});

mpi_fn!(fn MPI_Info_get / PMPI_Info_get(i: MPI_Info, key: *const c_char, len: c_int, val: *mut c_char, flag: *mut c_int) -> c_int {
    run("MPI_Info_get", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        // SAFETY: NUL-terminated string argument.
        let k = unsafe { cstr(key) };
        let g = inf.lock().unwrap();
        let v = g.get(&k);
        // SAFETY: `val` holds `len`+1 bytes by the standard; `flag` an output.
        unsafe {
            put(flag, v.is_some() as c_int);
            if let Some(v) = v {
                put_str(v, val, len.max(0) as usize + 1, std::ptr::null_mut());
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_get_string / PMPI_Info_get_string(i: MPI_Info, key: *const c_char, buflen: *mut c_int, val: *mut c_char, flag: *mut c_int) -> c_int {
    run("MPI_Info_get_string", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        if buflen.is_null() {
            return Err(err(class::ARG, "buflen is NULL"));
        }
        // SAFETY: NUL-terminated string argument; in/out `buflen`.
        let (k, cap) = unsafe { (cstr(key), *buflen) };
        let g = inf.lock().unwrap();
        let v = g.get(&k);
        // SAFETY: `val` holds `cap` bytes; outputs.
        unsafe {
            put(flag, v.is_some() as c_int);
            if let Some(v) = v {
                if cap > 0 {
                    put_str(v, val, cap as usize, std::ptr::null_mut());
                }
                *buflen = v.len() as c_int + 1;
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(i: MPI_Info, key: *const c_char, len: *mut c_int, flag: *mut c_int) -> c_int {
    run("MPI_Info_get_valuelen", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        // SAFETY: NUL-terminated string argument.
        let k = unsafe { cstr(key) };
        let g = inf.lock().unwrap();
        let v = g.get(&k);
        // SAFETY: outputs.
        unsafe {
            put(flag, v.is_some() as c_int);
            if let Some(v) = v {
                put(len, v.len() as c_int);
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_delete / PMPI_Info_delete(i: MPI_Info, key: *const c_char) -> c_int {
    run("MPI_Info_delete", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        // SAFETY: NUL-terminated string argument.
        let k = unsafe { cstr(key) };
        let r = inf.lock().unwrap().delete(&k);
        r
    })
});

mpi_fn!(fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(i: MPI_Info, n: *mut c_int) -> c_int {
    run("MPI_Info_get_nkeys", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        let k = inf.lock().unwrap().pairs.len();
        // SAFETY: output.
        unsafe { put(n, k as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(i: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
    run("MPI_Info_get_nthkey", MPI_COMM_WORLD, || {
        let inf = info(i)?;
        let g = inf.lock().unwrap();
        let k = g.pairs.get(n.max(0) as usize).filter(|_| n >= 0).ok_or_else(|| err(class::ARG, format!("key index {n} is out of range")))?;
        // SAFETY: `key` holds MPI_MAX_INFO_KEY bytes.
        unsafe { put_str(&k.0, key, 256, std::ptr::null_mut()) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_dup / PMPI_Info_dup(i: MPI_Info, out: *mut MPI_Info) -> c_int {
    run("MPI_Info_dup", MPI_COMM_WORLD, || {
        let inf = info(i)?.lock().unwrap().clone();
        // SAFETY: output.
        unsafe { put(out, INFOS.insert(Arc::new(Mutex::new(inf)))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Info_free / PMPI_Info_free(i: *mut MPI_Info) -> c_int {
    run("MPI_Info_free", MPI_COMM_WORLD, || {
        if i.is_null() {
            return Err(err(class::ARG, "info pointer is NULL"));
        }
        // SAFETY: checked in/out argument.
        let h = unsafe { *i };
        INFOS.remove(h).ok_or_else(|| err(class::INFO, format!("invalid info handle {h:#x}")))?;
        // SAFETY: as above.
        unsafe { *i = MPI_INFO_NULL };
        Ok(())
    })
});
