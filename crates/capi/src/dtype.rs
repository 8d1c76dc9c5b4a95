//! Datatype constructors, queries, pack/unpack.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, dtype, new_type, TYPES};
use crate::{arr, arr_mut, cstr, put, put_str, Void};
use gridwire_mpi::datatype::Combiner;
use gridwire_mpi::{class, err, Datatype, Result};
use std::ffi::{c_char, c_int};
use std::sync::Arc;

unsafe fn out_type(out: *mut MPI_Datatype, t: Result<Arc<Datatype>>) -> Result<()> {
    let t = t?;
    if out.is_null() {
        return Err(err(class::ARG, "the output datatype pointer is NULL"));
    }
    // SAFETY: checked non-null output argument.
    unsafe { *out = new_type(t) };
    Ok(())
}

fn ints(p: *const c_int, n: c_int) -> Vec<i64> {
    // SAFETY: the program's array of `n` ints.
    unsafe { arr(p, n) }.iter().map(|&x| x as i64).collect()
}

fn aints(p: *const MPI_Aint, n: c_int) -> Vec<isize> {
    // SAFETY: the program's array of `n` addresses.
    unsafe { arr(p, n) }.to_vec()
}

fn count_ok(n: c_int) -> Result<()> {
    if n < 0 {
        return Err(err(class::COUNT, format!("count {n} is negative")));
    }
    Ok(())
}

mpi_fn!(fn MPI_Type_contiguous / PMPI_Type_contiguous(n: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_contiguous", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::contiguous(n as i64, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_vector / PMPI_Type_vector(n: c_int, bl: c_int, stride: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_vector", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::vector(n as i64, bl as i64, stride as i64, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hvector / PMPI_Type_create_hvector(n: c_int, bl: c_int, stride: MPI_Aint, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hvector", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hvector(n as i64, bl as i64, stride, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_indexed / PMPI_Type_indexed(n: c_int, bls: *const c_int, ds: *const c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_indexed", MPI_COMM_WORLD, || {
        count_ok(n)?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::indexed(&ints(bls, n), &ints(ds, n), &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(n: c_int, bls: *const c_int, ds: *const MPI_Aint, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hindexed", MPI_COMM_WORLD, || {
        count_ok(n)?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hindexed(&ints(bls, n), &aints(ds, n), &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(n: c_int, bl: c_int, ds: *const c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_indexed_block", MPI_COMM_WORLD, || {
        count_ok(n)?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::indexed_block(bl as i64, &ints(ds, n), &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(n: c_int, bl: c_int, ds: *const MPI_Aint, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hindexed_block", MPI_COMM_WORLD, || {
        count_ok(n)?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hindexed_block(bl as i64, &aints(ds, n), &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_struct / PMPI_Type_create_struct(n: c_int, bls: *const c_int, ds: *const MPI_Aint, ts: *const MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_struct", MPI_COMM_WORLD, || {
        count_ok(n)?;
        // SAFETY: the program's array of `n` datatypes.
        let types = unsafe { arr(ts, n) }.iter().map(|&t| dtype(t)).collect::<Result<Vec<_>>>()?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::create_struct(&ints(bls, n), &aints(ds, n), &types)) }
    })
});

mpi_fn!(fn MPI_Type_create_subarray / PMPI_Type_create_subarray(nd: c_int, sizes: *const c_int, subs: *const c_int, starts: *const c_int, order: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_subarray", MPI_COMM_WORLD, || {
        let order_c = match order {
            MPI_ORDER_C => true,
            MPI_ORDER_FORTRAN => false,
            _ => return Err(err(class::ARG, format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"))),
        };
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::subarray(&ints(sizes, nd), &ints(subs, nd), &ints(starts, nd), order_c, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_resized / PMPI_Type_create_resized(old: MPI_Datatype, lb: MPI_Aint, extent: MPI_Aint, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_resized", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::resized(lb, extent, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_dup / PMPI_Type_dup(old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_dup", MPI_COMM_WORLD, || {
        let o = dtype(old)?;
        let n = Datatype::dup(&o);
        *n.attrs.lock().unwrap() = o.attrs.lock().unwrap().clone();
        // SAFETY: output argument.
        unsafe { out_type(out, Ok(n)) }
    })
});

mpi_fn!(fn MPI_Type_commit / PMPI_Type_commit(t: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_commit", MPI_COMM_WORLD, || {
        if t.is_null() {
            return Err(err(class::ARG, "datatype pointer is NULL"));
        }
        // SAFETY: checked in/out argument.
        dtype(unsafe { *t })?.commit();
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_free / PMPI_Type_free(t: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_free", MPI_COMM_WORLD, || {
        if t.is_null() {
            return Err(err(class::ARG, "datatype pointer is NULL"));
        }
        // SAFETY: checked in/out argument.
        let h = unsafe { *t };
        if handles::is_predefined_type(h) {
            return Err(err(class::TYPE, "predefined datatypes cannot be freed"));
        }
        let dt = dtype(h)?;
        crate::attr::delete_type_attrs(h, &dt)?;
        // Operations in flight keep their own reference to the type.
        TYPES.remove(h);
        // SAFETY: as above.
        unsafe { *t = MPI_DATATYPE_NULL };
        Ok(())
    })
});

macro_rules! size_fn {
    ($name:ident, $pname:ident, $t:ty) => {
        mpi_fn!(fn $name / $pname(t: MPI_Datatype, size: *mut $t) -> c_int {
            run(stringify!($name), MPI_COMM_WORLD, || {
                let dt = dtype(t)?;
                // SAFETY: output argument.
                unsafe { put(size, dt.size.min(<$t>::MAX as usize) as $t) };
                Ok(())
            })
        });
    };
}
size_fn!(MPI_Type_size, PMPI_Type_size, c_int);
size_fn!(MPI_Type_size_x, PMPI_Type_size_x, MPI_Count);
size_fn!(MPI_Type_size_c, PMPI_Type_size_c, MPI_Count);

macro_rules! extent_fn {
    ($name:ident, $pname:ident, $t:ty, $true:expr) => {
        mpi_fn!(fn $name / $pname(t: MPI_Datatype, lb: *mut $t, extent: *mut $t) -> c_int {
            run(stringify!($name), MPI_COMM_WORLD, || {
                let dt = dtype(t)?;
                let (l, e) = if $true { (dt.true_lb, dt.true_extent) } else { (dt.lb, dt.extent) };
                // SAFETY: output arguments.
                unsafe {
                    put(lb, l as $t);
                    put(extent, e as $t);
                }
                Ok(())
            })
        });
    };
}
extent_fn!(MPI_Type_get_extent, PMPI_Type_get_extent, MPI_Aint, false);
extent_fn!(
    MPI_Type_get_extent_x,
    PMPI_Type_get_extent_x,
    MPI_Count,
    false
);
extent_fn!(
    MPI_Type_get_extent_c,
    PMPI_Type_get_extent_c,
    MPI_Count,
    false
);
extent_fn!(
    MPI_Type_get_true_extent,
    PMPI_Type_get_true_extent,
    MPI_Aint,
    true
);
extent_fn!(
    MPI_Type_get_true_extent_x,
    PMPI_Type_get_true_extent_x,
    MPI_Count,
    true
);
extent_fn!(
    MPI_Type_get_true_extent_c,
    PMPI_Type_get_true_extent_c,
    MPI_Count,
    true
);

mpi_fn!(fn MPI_Type_set_name / PMPI_Type_set_name(t: MPI_Datatype, name: *const c_char) -> c_int {
    run("MPI_Type_set_name", MPI_COMM_WORLD, || {
        let dt = dtype(t)?;
        // SAFETY: NUL-terminated string argument.
        *dt.name.lock().unwrap() = unsafe { cstr(name) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_get_name / PMPI_Type_get_name(t: MPI_Datatype, name: *mut c_char, len: *mut c_int) -> c_int {
    run("MPI_Type_get_name", MPI_COMM_WORLD, || {
        let dt = dtype(t)?;
        let s = dt.name.lock().unwrap().clone();
        // SAFETY: `name` holds MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_str(&s, name, MPI_MAX_OBJECT_NAME, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack_size / PMPI_Pack_size(n: c_int, t: MPI_Datatype, _c: MPI_Comm, size: *mut c_int) -> c_int {
    run("MPI_Pack_size", MPI_COMM_WORLD, || {
        count_ok(n)?;
        let dt = dtype(t)?;
        // SAFETY: output argument.
        unsafe { put(size, (dt.size * n as usize) as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack / PMPI_Pack(inb: *const Void, n: c_int, t: MPI_Datatype, outb: *mut Void, outsize: c_int, pos: *mut c_int, c: MPI_Comm) -> c_int {
    run("MPI_Pack", c, || {
        // SAFETY: the program's input buffer.
        let b = unsafe { handles::buf(inb, n as i64, t) }?;
        handles::mpi()?.check_buf(&b, "input buffer")?;
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument.
        let p = unsafe { *pos };
        let need = b.bytes();
        if p < 0 || p as usize + need > outsize.max(0) as usize {
            return Err(err(class::TRUNCATE, format!("MPI_Pack: {need} bytes at position {p} do not fit in {outsize}")));
        }
        // SAFETY: `outb` holds `outsize` bytes, and we write inside it.
        let out = unsafe { arr_mut((outb as *mut u8).add(p as usize), need as c_int) };
        out.copy_from_slice(&b.pack());
        // SAFETY: as above.
        unsafe { *pos = p + need as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Unpack / PMPI_Unpack(inb: *const Void, insize: c_int, pos: *mut c_int, outb: *mut Void, n: c_int, t: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Unpack", c, || {
        // SAFETY: the program's output buffer.
        let b = unsafe { handles::buf(outb, n as i64, t) }?;
        handles::mpi()?.check_buf(&b, "output buffer")?;
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument.
        let p = unsafe { *pos };
        let need = b.bytes();
        if p < 0 || p as usize + need > insize.max(0) as usize {
            return Err(err(class::TRUNCATE, format!("MPI_Unpack: {need} bytes at position {p} exceed the input of {insize}")));
        }
        // SAFETY: `inb` holds `insize` bytes; we read inside it.
        let data = unsafe { arr((inb as *const u8).add(p as usize), need as c_int) };
        b.unpack(data);
        // SAFETY: as above.
        unsafe { *pos = p + need as c_int };
        Ok(())
    })
});

fn envelope(dt: &Datatype) -> (c_int, c_int, c_int, c_int) {
    // (combiner, nints, naddrs, ntypes)
    match &dt.combiner {
        Combiner::Named => (MPI_COMBINER_NAMED, 0, 0, 0),
        Combiner::Dup(_) => (102, 0, 0, 1),
        Combiner::Contiguous { .. } => (103, 1, 0, 1),
        Combiner::Vector { .. } => (104, 3, 0, 1),
        Combiner::Hvector { .. } => (105, 2, 1, 1),
        Combiner::Indexed { blocklens, .. } => (106, 1 + 2 * blocklens.len() as c_int, 0, 1),
        Combiner::Hindexed { blocklens, .. } => (
            107,
            1 + blocklens.len() as c_int,
            blocklens.len() as c_int,
            1,
        ),
        Combiner::IndexedBlock { displs, .. } => (108, 2 + displs.len() as c_int, 0, 1),
        Combiner::HindexedBlock { displs, .. } => (109, 2, displs.len() as c_int, 1),
        Combiner::Struct { blocklens, .. } => (
            110,
            1 + blocklens.len() as c_int,
            blocklens.len() as c_int,
            blocklens.len() as c_int,
        ),
        Combiner::Subarray { sizes, .. } => (111, 2 + 3 * sizes.len() as c_int, 0, 1),
        Combiner::Resized { .. } => (116, 0, 2, 1),
    }
}

mpi_fn!(fn MPI_Type_get_envelope / PMPI_Type_get_envelope(t: MPI_Datatype, ni: *mut c_int, na: *mut c_int, nt: *mut c_int, comb: *mut c_int) -> c_int {
    run("MPI_Type_get_envelope", MPI_COMM_WORLD, || {
        let (c, i, a, ty) = envelope(&*dtype(t)?);
        // SAFETY: output arguments.
        unsafe {
            put(ni, i);
            put(na, a);
            put(nt, ty);
            put(comb, c);
        }
        Ok(())
    })
});

/// The handle to give back for a constituent type (predefined: its own; derived: a new handle).
fn type_handle(t: &Arc<Datatype>) -> MPI_Datatype {
    if t.predefined {
        return t.handle.load(std::sync::atomic::Ordering::Relaxed);
    }
    new_type(t.clone())
}

mpi_fn!(fn MPI_Type_get_contents / PMPI_Type_get_contents(t: MPI_Datatype, mi: c_int, ma: c_int, mt: c_int, is: *mut c_int, as_: *mut MPI_Aint, ts: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_get_contents", MPI_COMM_WORLD, || {
        let dt = dtype(t)?;
        let (c, ni, na, nt) = envelope(&dt);
        if c == MPI_COMBINER_NAMED {
            return Err(err(class::TYPE, "MPI_Type_get_contents on a predefined datatype"));
        }
        if mi < ni || ma < na || mt < nt {
            return Err(err(class::ARG, "the output arrays are smaller than MPI_Type_get_envelope said"));
        }
        let mut iv: Vec<i64> = Vec::new();
        let mut av: Vec<isize> = Vec::new();
        let mut tv: Vec<Arc<Datatype>> = Vec::new();
        match &dt.combiner {
            Combiner::Named => {}
            Combiner::Dup(o) => tv.push(o.clone()),
            Combiner::Contiguous { count, old } => { iv.push(*count); tv.push(old.clone()); }
            Combiner::Vector { count, blocklen, stride, old } => { iv.extend([*count, *blocklen, *stride]); tv.push(old.clone()); }
            Combiner::Hvector { count, blocklen, stride, old } => { iv.extend([*count, *blocklen]); av.push(*stride); tv.push(old.clone()); }
            Combiner::Indexed { blocklens, displs, old } => {
                iv.push(blocklens.len() as i64); iv.extend(blocklens); iv.extend(displs); tv.push(old.clone());
            }
            Combiner::Hindexed { blocklens, displs, old } => {
                iv.push(blocklens.len() as i64); iv.extend(blocklens); av.extend(displs); tv.push(old.clone());
            }
            Combiner::IndexedBlock { blocklen, displs, old } => {
                iv.extend([displs.len() as i64, *blocklen]); iv.extend(displs); tv.push(old.clone());
            }
            Combiner::HindexedBlock { blocklen, displs, old } => {
                iv.extend([displs.len() as i64, *blocklen]); av.extend(displs); tv.push(old.clone());
            }
            Combiner::Struct { blocklens, displs, types } => {
                iv.push(blocklens.len() as i64); iv.extend(blocklens); av.extend(displs); tv.extend(types.iter().cloned());
            }
            Combiner::Subarray { sizes, subsizes, starts, order_c, old } => {
                iv.push(sizes.len() as i64); iv.extend(sizes); iv.extend(subsizes); iv.extend(starts);
                iv.push(if *order_c { MPI_ORDER_C as i64 } else { MPI_ORDER_FORTRAN as i64 }); tv.push(old.clone());
            }
            Combiner::Resized { lb, extent, old } => { av.extend([*lb, *extent]); tv.push(old.clone()); }
        }
        // SAFETY: output arrays with at least the envelope's sizes (checked above).
        unsafe {
            for (o, v) in arr_mut(is, iv.len() as c_int).iter_mut().zip(&iv) { *o = *v as c_int; }
            arr_mut(as_, av.len() as c_int).copy_from_slice(&av);
            for (o, v) in arr_mut(ts, tv.len() as c_int).iter_mut().zip(&tv) { *o = type_handle(v); }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_get_value_index / PMPI_Type_get_value_index(v: MPI_Datatype, i: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_get_value_index", MPI_COMM_WORLD, || {
        let h = match (v, i) {
            (528, 521) => 552,
            (532, 521) => 553,
            (522, 521) => 554,
            (521, 521) => 555,
            (520, 521) => 556,
            (544, 521) => 557,
            (538, 538) => 560,
            (540, 540) => 561,
            (537, 537) => 562,
            _ => MPI_DATATYPE_NULL,
        };
        // SAFETY: output argument.
        unsafe { put(out, h) };
        Ok(())
    })
});
