//! Datatype constructors, queries, pack/unpack.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, dtype, new_type, TYPES};
use crate::{arr, arr_mut, cstr, put, put_str, Void};
use gridwire_mpi::datatype::{Combiner, F90Kind};
use gridwire_mpi::{class, err, Datatype, Result};
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};

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
        crate::attr::copy_type_attrs(old, &o, &n)?;
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
        if dt.predefined {
            // A type of MPI_Type_create_f90_*: predefined, so it stays (later
            // calls give the same handle back); freeing it only nulls the
            // program's handle, as MPICH does.
            // SAFETY: checked in/out argument.
            unsafe { *t = MPI_DATATYPE_NULL };
            return Ok(());
        }
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
                // A size the argument cannot hold is MPI_UNDEFINED (MPI 4.1 §5.1.5),
                // never a clamped value that looks real.
                let v = <$t>::try_from(dt.size).unwrap_or(MPI_UNDEFINED as $t);
                // SAFETY: output argument.
                unsafe { put(size, v) };
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
        // The null handle has a name too (as in MPICH and Open MPI).
        let s = if t == MPI_DATATYPE_NULL {
            "MPI_DATATYPE_NULL".to_string()
        } else {
            dtype(t)?.name.lock().unwrap().clone()
        };
        // SAFETY: `name` holds MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_str(&s, name, MPI_MAX_OBJECT_NAME, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack_size / PMPI_Pack_size(n: c_int, t: MPI_Datatype, _c: MPI_Comm, size: *mut c_int) -> c_int {
    run("MPI_Pack_size", MPI_COMM_WORLD, || {
        count_ok(n)?;
        let dt = dtype(t)?;
        let bytes = dt.size.checked_mul(n as usize).and_then(|b| c_int::try_from(b).ok());
        let bytes = bytes.ok_or_else(|| {
            err(class::VALUE_TOO_LARGE, format!("{n} elements of {} bytes do not fit in an int (use MPI_Pack_size_c)", dt.size))
        })?;
        // SAFETY: output argument.
        unsafe { put(size, bytes) };
        Ok(())
    })
});

/// Packs `n` elements at `inb` into `outb[p..]`; returns the new position.
///
/// # Safety
/// `inb` holds `n` elements of `t`; `outb` holds `outsize` bytes.
unsafe fn pack_at(
    name: &str,
    inb: *const Void,
    n: i64,
    t: MPI_Datatype,
    outb: *mut Void,
    outsize: i64,
    p: i64,
) -> Result<i64> {
    // SAFETY: the program's input buffer.
    let b = unsafe { handles::buf(inb, n, t) }?;
    handles::mpi()?.check_buf(&b, "input buffer")?;
    let need = b.bytes() as i64;
    // Checked: a position near i64::MAX wrapped `p + need` below `outsize`
    // and the copy went far past the output buffer.
    if p < 0 || p.checked_add(need).is_none_or(|end| end > outsize) {
        return Err(err(
            class::TRUNCATE,
            format!("{name}: {need} bytes at position {p} do not fit in {outsize}"),
        ));
    }
    if need > 0 {
        // SAFETY: `outb` holds `outsize` >= p + need bytes.
        let out = unsafe {
            std::slice::from_raw_parts_mut((outb as *mut u8).add(p as usize), need as usize)
        };
        out.copy_from_slice(&b.pack());
    }
    Ok(p + need)
}

/// Unpacks `n` elements from `inb[p..]`; returns the new position.
///
/// # Safety
/// `inb` holds `insize` bytes; `outb` holds `n` elements of `t`.
pub(crate) unsafe fn unpack_at(
    name: &str,
    inb: *const Void,
    insize: i64,
    p: i64,
    outb: *mut Void,
    n: i64,
    t: MPI_Datatype,
) -> Result<i64> {
    // SAFETY: the program's output buffer.
    let b = unsafe { handles::buf(outb, n, t) }?;
    handles::mpi()?.check_buf(&b, "output buffer")?;
    let need = b.bytes() as i64;
    if p < 0 || p.checked_add(need).is_none_or(|end| end > insize) {
        return Err(err(
            class::TRUNCATE,
            format!("{name}: {need} bytes at position {p} exceed the input of {insize}"),
        ));
    }
    if need > 0 {
        // SAFETY: `inb` holds `insize` >= p + need bytes.
        let data = unsafe {
            std::slice::from_raw_parts((inb as *const u8).add(p as usize), need as usize)
        };
        b.unpack(data);
    }
    Ok(p + need)
}

mpi_fn!(fn MPI_Pack / PMPI_Pack(inb: *const Void, n: c_int, t: MPI_Datatype, outb: *mut Void, outsize: c_int, pos: *mut c_int, c: MPI_Comm) -> c_int {
    run("MPI_Pack", c, || {
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument; buffers as the standard says.
        unsafe { *pos = pack_at("MPI_Pack", inb, n as i64, t, outb, outsize as i64, *pos as i64)? as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack_c / PMPI_Pack_c(inb: *const Void, n: MPI_Count, t: MPI_Datatype, outb: *mut Void, outsize: MPI_Count, pos: *mut MPI_Count, c: MPI_Comm) -> c_int {
    run("MPI_Pack_c", c, || {
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument; buffers as the standard says.
        unsafe { *pos = pack_at("MPI_Pack_c", inb, n, t, outb, outsize, *pos)? };
        Ok(())
    })
});

mpi_fn!(fn MPI_Unpack / PMPI_Unpack(inb: *const Void, insize: c_int, pos: *mut c_int, outb: *mut Void, n: c_int, t: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Unpack", c, || {
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument; buffers as the standard says.
        unsafe { *pos = unpack_at("MPI_Unpack", inb, insize as i64, *pos as i64, outb, n as i64, t)? as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Unpack_c / PMPI_Unpack_c(inb: *const Void, insize: MPI_Count, pos: *mut MPI_Count, outb: *mut Void, n: MPI_Count, t: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Unpack_c", c, || {
        if pos.is_null() {
            return Err(err(class::ARG, "position is NULL"));
        }
        // SAFETY: checked in/out argument; buffers as the standard says.
        unsafe { *pos = unpack_at("MPI_Unpack_c", inb, insize, *pos, outb, n, t)? };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack_size_c / PMPI_Pack_size_c(n: MPI_Count, t: MPI_Datatype, _c: MPI_Comm, size: *mut MPI_Count) -> c_int {
    run("MPI_Pack_size_c", MPI_COMM_WORLD, || {
        if n < 0 {
            return Err(err(class::COUNT, format!("count {n} is negative")));
        }
        let dt = dtype(t)?;
        let bytes = (dt.size as MPI_Count).checked_mul(n).ok_or_else(|| {
            err(class::COUNT, format!("{n} elements of {} bytes exceed MPI_Count", dt.size))
        })?;
        // SAFETY: output argument.
        unsafe { put(size, bytes) };
        Ok(())
    })
});

// ---- large-count (`_c`) constructors -------------------------------------------

fn counts_c(p: *const MPI_Count, n: MPI_Count) -> Result<Vec<i64>> {
    let n = c_int::try_from(n).map_err(|_| err(class::COUNT, format!("count {n} is too large")))?;
    // SAFETY: the program's array of `n` counts.
    Ok(unsafe { arr(p, n) }.to_vec())
}

fn aints_c(p: *const MPI_Count, n: MPI_Count) -> Result<Vec<isize>> {
    Ok(counts_c(p, n)?.into_iter().map(|x| x as isize).collect())
}

mpi_fn!(fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(n: MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_contiguous_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::contiguous(n, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_vector_c / PMPI_Type_vector_c(n: MPI_Count, bl: MPI_Count, stride: MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_vector_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::vector(n, bl, stride, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(n: MPI_Count, bl: MPI_Count, stride: MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hvector_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hvector(n, bl, stride as isize, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_indexed_c / PMPI_Type_indexed_c(n: MPI_Count, bls: *const MPI_Count, ds: *const MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_indexed_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::indexed(&counts_c(bls, n)?, &counts_c(ds, n)?, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(n: MPI_Count, bls: *const MPI_Count, ds: *const MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hindexed_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hindexed(&counts_c(bls, n)?, &aints_c(ds, n)?, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(n: MPI_Count, bl: MPI_Count, ds: *const MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_indexed_block_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::indexed_block(bl, &counts_c(ds, n)?, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(n: MPI_Count, bl: MPI_Count, ds: *const MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_hindexed_block_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::hindexed_block(bl, &aints_c(ds, n)?, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(n: MPI_Count, bls: *const MPI_Count, ds: *const MPI_Count, ts: *const MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_struct_c", MPI_COMM_WORLD, || {
        let nn = c_int::try_from(n).map_err(|_| err(class::COUNT, format!("count {n} is too large")))?;
        // SAFETY: the program's array of `n` datatypes.
        let types = unsafe { arr(ts, nn) }.iter().map(|&t| dtype(t)).collect::<Result<Vec<_>>>()?;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::create_struct(&counts_c(bls, n)?, &aints_c(ds, n)?, &types)) }
    })
});

mpi_fn!(fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(nd: c_int, sizes: *const MPI_Count, subs: *const MPI_Count, starts: *const MPI_Count, order: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_subarray_c", MPI_COMM_WORLD, || {
        let order_c = match order {
            MPI_ORDER_C => true,
            MPI_ORDER_FORTRAN => false,
            _ => return Err(err(class::ARG, format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"))),
        };
        let n = nd as MPI_Count;
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::subarray(&counts_c(sizes, n)?, &counts_c(subs, n)?, &counts_c(starts, n)?, order_c, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(old: MPI_Datatype, lb: MPI_Count, extent: MPI_Count, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_resized_c", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_type(out, Datatype::resized(lb as isize, extent as isize, &dtype(old)?)) }
    })
});

mpi_fn!(fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(t: MPI_Datatype, ni: *mut MPI_Count, na: *mut MPI_Count, nl: *mut MPI_Count, nt: *mut MPI_Count, comb: *mut c_int) -> c_int {
    run("MPI_Type_get_envelope_c", MPI_COMM_WORLD, || {
        // Integer arguments are reported as ints, unless one does not fit
        // (then all of them as large counts, see `large_counts`).
        let dt = dtype(t)?;
        let (c, i, a, ty) = envelope(&dt);
        let large = large_counts(&dt, &contents(&dt).0);
        // SAFETY: output arguments.
        unsafe {
            put(ni, if large { 0 } else { i as MPI_Count });
            put(na, a as MPI_Count);
            put(nl, if large { i as MPI_Count } else { 0 });
            put(nt, ty as MPI_Count);
            put(comb, c);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(t: MPI_Datatype, mi: MPI_Count, ma: MPI_Count, ml: MPI_Count, mt: MPI_Count,
        is: *mut c_int, as_: *mut MPI_Aint, ls: *mut MPI_Count, ts: *mut MPI_Datatype) -> c_int {
    let clamp = |v: MPI_Count| v.clamp(0, c_int::MAX as MPI_Count) as c_int;
    let large = match dtype(t) {
        Ok(dt) => {
            let (iv, av, tv) = contents(&dt);
            large_counts(&dt, &iv).then_some((iv, av, tv))
        }
        Err(_) => None,
    };
    let Some((iv, av, tv)) = large else {
        // SAFETY: same contract as the int form (the arguments fit in ints).
        return unsafe { PMPI_Type_get_contents(t, clamp(mi), clamp(ma), clamp(mt), is, as_, ts) };
    };
    run("MPI_Type_get_contents_c", MPI_COMM_WORLD, || {
        if ml < iv.len() as MPI_Count || ma < av.len() as MPI_Count || mt < tv.len() as MPI_Count {
            return Err(err(class::ARG, "the output arrays are smaller than MPI_Type_get_envelope_c said"));
        }
        // SAFETY: output arrays with at least the envelope's sizes (checked above).
        unsafe {
            arr_mut(ls, iv.len() as c_int).copy_from_slice(&iv);
            arr_mut(as_, av.len() as c_int).copy_from_slice(&av);
            for (o, v) in arr_mut(ts, tv.len() as c_int).iter_mut().zip(&tv) { *o = type_handle(v); }
        }
        Ok(())
    })
});

// `MPI_Type_match_size`: the predefined type of a class and size.
mpi_fn!(fn MPI_Type_match_size / PMPI_Type_match_size(class_: c_int, size: c_int, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_match_size", MPI_COMM_WORLD, || {
        // The fixed-size Fortran types of the standard ABI (MPI_LOGICALn,
        // MPI_INTEGERn, MPI_REALn, MPI_COMPLEXn), as the standard asks:
        // MPIX_TYPECLASS_LOGICAL 191, MPI_TYPECLASS_INTEGER 192, REAL 193, COMPLEX 194.
        let h = match (class_, size) {
            (191, 1) => 704,
            (191, 2) => 712,
            (191, 4) => 720,
            (191, 8) => 728,
            (191, 16) => 736,
            (192, 1) => 705,
            (192, 2) => 713,
            (192, 4) => 721,
            (192, 8) => 729,
            (192, 16) => 737,
            (193, 2) => 714,
            (193, 4) => 722,
            (193, 8) => 730,
            (193, 16) => 738,
            (194, 4) => 723,
            (194, 8) => 731,
            (194, 16) => 739,
            (194, 32) => 747,
            _ => return Err(err(class::ARG, format!("no predefined type of class {class_} and size {size}"))),
        };
        // SAFETY: output argument.
        unsafe { put(out, h) };
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
        Combiner::Darray { gsizes, .. } => (112, 4 + 4 * gsizes.len() as c_int, 0, 1),
        Combiner::F90 {
            kind: F90Kind::Real,
            ..
        } => (MPI_COMBINER_F90_REAL, 2, 0, 0),
        Combiner::F90 {
            kind: F90Kind::Complex,
            ..
        } => (MPI_COMBINER_F90_COMPLEX, 2, 0, 0),
        Combiner::F90 {
            kind: F90Kind::Integer,
            ..
        } => (MPI_COMBINER_F90_INTEGER, 1, 0, 0),
    }
}

mpi_fn!(fn MPI_Type_get_envelope / PMPI_Type_get_envelope(t: MPI_Datatype, ni: *mut c_int, na: *mut c_int, nt: *mut c_int, comb: *mut c_int) -> c_int {
    run("MPI_Type_get_envelope", MPI_COMM_WORLD, || {
        let dt = dtype(t)?;
        if large_counts(&dt, &contents(&dt).0) {
            return Err(err(class::TYPE, "a constructor argument of this datatype does not fit in an int: use MPI_Type_get_envelope_c"));
        }
        let (c, i, a, ty) = envelope(&dt);
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
        let (iv, av, tv) = contents(&dt);
        if large_counts(&dt, &iv) {
            return Err(err(class::TYPE, "a constructor argument of this datatype does not fit in an int: use MPI_Type_get_contents_c"));
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

/// A derived datatype's constructor arguments: integers, addresses, types.
#[rustfmt::skip]
fn contents(dt: &Datatype) -> (Vec<i64>, Vec<isize>, Vec<Arc<Datatype>>) {
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
            Combiner::Darray { size, rank, gsizes, distribs, psizes, order_c, old } => {
                iv.extend([*size, *rank, gsizes.len() as i64]);
                iv.extend(gsizes);
                let dc: Vec<(c_int, c_int)> = distribs.iter().map(|&d| crate::darray::distrib_c(d)).collect();
                iv.extend(dc.iter().map(|d| d.0 as i64));
                iv.extend(dc.iter().map(|d| d.1 as i64));
                iv.extend(psizes);
                iv.push(if *order_c { MPI_ORDER_C as i64 } else { MPI_ORDER_FORTRAN as i64 });
                tv.push(old.clone());
            }
            Combiner::F90 { kind: F90Kind::Integer, r, .. } => iv.push(*r as i64),
            Combiner::F90 { p, r, .. } => iv.extend([*p as i64, *r as i64]),
        }
    (iv, av, tv)
}

/// Whether the `_c` queries report the integer arguments as large counts:
/// for the combiners whose integer arguments are all counts, when one of
/// them does not fit in an `int` (a type made by a `_c` constructor with
/// such a count; the int queries then fail instead of truncating).
fn large_counts(dt: &Datatype, iv: &[i64]) -> bool {
    matches!(
        dt.combiner,
        Combiner::Contiguous { .. }
            | Combiner::Vector { .. }
            | Combiner::Hvector { .. }
            | Combiner::Indexed { .. }
            | Combiner::Hindexed { .. }
            | Combiner::IndexedBlock { .. }
            | Combiner::HindexedBlock { .. }
            | Combiner::Struct { .. }
    ) && iv.iter().any(|&v| c_int::try_from(v).is_err())
}

mpi_fn!(fn MPI_Type_get_value_index / PMPI_Type_get_value_index(v: MPI_Datatype, i: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_get_value_index", MPI_COMM_WORLD, || {
        dtype(v)?;
        dtype(i)?;
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

// ---- Fortran 90 parameterized types: the predefined type that fits -------------

fn f90_pick(
    what: &str,
    p: c_int,
    r: c_int,
    table: &[(c_int, c_int, MPI_Datatype)],
) -> Result<MPI_Datatype> {
    let any = |v: c_int| v == MPI_UNDEFINED;
    table
        .iter()
        .find(|&&(tp, tr, _)| (any(p) || p <= tp) && (any(r) || r <= tr))
        .map(|&(_, _, h)| h)
        .ok_or_else(|| {
            err(
                class::ARG,
                format!("no {what} type with precision {p} and range {r}"),
            )
        })
}

/// The type `MPI_Type_create_f90_*` returns for (kind, p, r): the predefined
/// type that fits, as a type of its own whose envelope says
/// `MPI_COMBINER_F90_*` with the program's p and r (MPI-4.1 §4.1.13, §19.1.9).
/// One handle per (kind, p, r), made on first use and kept for the run: the
/// standard calls these predefined (they cannot be freed), and a program may
/// compare two calls' handles.
fn f90_type(kind: F90Kind, p: c_int, r: c_int, base: MPI_Datatype) -> Result<MPI_Datatype> {
    /// (kind, p, r) of a call, and the handle it got.
    type F90Made = ((F90Kind, c_int, c_int), MPI_Datatype);
    static MADE: Mutex<Vec<F90Made>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, h)) = made.iter().find(|(k, _)| *k == (kind, p, r)) {
        return Ok(h);
    }
    let b = dtype(base)?;
    let basic = b
        .basic
        .ok_or_else(|| err(class::INTERN, "an F90 base type without a basic type"))?;
    let name = b.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut t = Datatype::predefined(basic, &name);
    Arc::get_mut(&mut t)
        .expect("a type just made has one owner")
        .combiner = Combiner::F90 { kind, p, r };
    let h = new_type(t);
    made.push(((kind, p, r), h));
    Ok(h)
}

mpi_fn!(fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_f90_real", MPI_COMM_WORLD, || {
        let base = f90_pick("REAL", p, r, &[(6, 37, 722), (15, 307, 730), (33, 4931, 738)])?;
        let h = f90_type(F90Kind::Real, p, r, base)?;
        // SAFETY: output argument.
        unsafe { put(out, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_f90_complex", MPI_COMM_WORLD, || {
        let base = f90_pick("COMPLEX", p, r, &[(6, 37, 731), (15, 307, 739), (33, 4931, 747)])?;
        let h = f90_type(F90Kind::Complex, p, r, base)?;
        // SAFETY: output argument.
        unsafe { put(out, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_f90_integer", MPI_COMM_WORLD, || {
        let base = f90_pick("INTEGER", 0, r, &[(0, 2, 705), (0, 4, 713), (0, 9, 721), (0, 18, 729)])?;
        let h = f90_type(F90Kind::Integer, MPI_UNDEFINED, r, base)?;
        // SAFETY: output argument.
        unsafe { put(out, h) };
        Ok(())
    })
});
