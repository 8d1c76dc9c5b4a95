//! Categories: `gw_core` (the runtime; its methods `gw_self`, `gw_shm`,
//! `gw_tcp`, `gw_udp` are its subcategories), `gw_transform` (the transforms'
//! policy; `gw_encrypt`, `gw_compress` below it) and `gw_mpi` (the MPI layer).

use super::*;
use std::sync::atomic::{AtomicI32, Ordering};

pub(crate) struct Category {
    pub name: String,
    pub desc: String,
    pub subcategories: Vec<usize>,
}

pub(crate) fn categories() -> &'static [Category] {
    static T: std::sync::OnceLock<Vec<Category>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let methods = gridwire_core::method::registry();
        let mut v = vec![Category {
            name: "gw_core".into(),
            desc: "The gridwire runtime: method selection, progress, links".into(),
            subcategories: (1..=methods.len()).collect(),
        }];
        v.extend(methods.iter().map(|m| Category {
            name: format!("gw_{}", m.name),
            desc: format!("The {} method: {}", m.name, m.summary),
            subcategories: vec![],
        }));
        // The transforms: their policy, with one subcategory per transform.
        let transforms = gridwire_core::method::transform::registry();
        let first = v.len() + 1;
        v.push(Category {
            name: "gw_transform".into(),
            desc: "Transforms stacked on a method (encrypt, compress) and the policy that \
                   chooses them per link"
                .into(),
            subcategories: (first..first + transforms.len()).collect(),
        });
        v.extend(transforms.iter().map(|t| Category {
            name: format!("gw_{}", t.name),
            desc: format!("The {} transform", t.name),
            subcategories: vec![],
        }));
        v.push(Category {
            name: "gw_mpi".into(),
            desc: "The MPI layer: eager limits, waiting, unexpected messages, collectives".into(),
            subcategories: vec![],
        });
        v
    })
}

/// Bumped when variables are added (the methods' counters, at MPI_Init).
static CHANGED: AtomicI32 = AtomicI32::new(0);

pub(super) fn changed() {
    CHANGED.fetch_add(1, Ordering::Relaxed);
}

fn cvars_of(name: &str) -> Vec<c_int> {
    (0..cvar::cvars().len())
        .filter(|&i| cvar::cvars()[i].category == name)
        .map(|i| i as c_int)
        .collect()
}

fn pvars_of(name: &str) -> Vec<c_int> {
    pvar::with_table(|t| {
        (0..t.len())
            .filter(|&i| t[i].category == name)
            .map(|i| i as c_int)
            .collect()
    })
}

fn events_of(name: &str) -> Vec<c_int> {
    if name == "gw_core" {
        (0..event::EVENTS.len() as c_int).collect()
    } else {
        vec![]
    }
}

fn category(i: c_int) -> TResult<&'static Category> {
    Ok(&categories()[index(i, categories().len())?])
}

/// Copies up to `len` indices into `out`.
///
/// # Safety
/// `out` holds `len` ints.
unsafe fn put_indices(v: &[c_int], len: c_int, out: *mut c_int) -> TResult {
    if len < 0 {
        return Err(MPI_ERR_ARG);
    }
    // SAFETY: `out` holds `len` ints by the caller's contract.
    let dst = unsafe { crate::arr_mut(out, len) };
    for (d, s) in dst.iter_mut().zip(v) {
        *d = *s;
    }
    Ok(())
}

mpi_fn!(fn MPI_T_category_get_num / PMPI_T_category_get_num(n: *mut c_int) -> c_int {
    // SAFETY: output argument.
    t_run(|| { unsafe { put(n, categories().len() as c_int) }; Ok(()) })
});

mpi_fn!(fn MPI_T_category_get_info / PMPI_T_category_get_info(i: c_int, name: *mut c_char, name_len: *mut c_int,
        desc: *mut c_char, desc_len: *mut c_int, num_cvars: *mut c_int, num_pvars: *mut c_int,
        num_categories: *mut c_int) -> c_int {
    t_run(|| {
        let c = category(i)?;
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put_tstr(&c.name, name, name_len);
            put_tstr(&c.desc, desc, desc_len);
            put(num_cvars, cvars_of(&c.name).len() as c_int);
            put(num_pvars, pvars_of(&c.name).len() as c_int);
            put(num_categories, c.subcategories.len() as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(i: c_int, n: *mut c_int) -> c_int {
    t_run(|| {
        let c = category(i)?;
        // SAFETY: output argument.
        unsafe { put(n, events_of(&c.name).len() as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, out: *mut c_int) -> c_int {
    t_run(|| {
        // SAFETY: `name` is a C string argument.
        let i = unsafe { find_name(name, |s| categories().iter().position(|c| c.name == s)) }?;
        // SAFETY: output argument.
        unsafe { put(out, i) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(i: c_int, len: c_int, out: *mut c_int) -> c_int {
    // SAFETY: `out` holds `len` ints.
    t_run(|| unsafe { put_indices(&cvars_of(&category(i)?.name), len, out) })
});

mpi_fn!(fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(i: c_int, len: c_int, out: *mut c_int) -> c_int {
    // SAFETY: `out` holds `len` ints.
    t_run(|| unsafe { put_indices(&pvars_of(&category(i)?.name), len, out) })
});

mpi_fn!(fn MPI_T_category_get_events / PMPI_T_category_get_events(i: c_int, len: c_int, out: *mut c_int) -> c_int {
    // SAFETY: `out` holds `len` ints.
    t_run(|| unsafe { put_indices(&events_of(&category(i)?.name), len, out) })
});

mpi_fn!(fn MPI_T_category_get_categories / PMPI_T_category_get_categories(i: c_int, len: c_int, out: *mut c_int) -> c_int {
    t_run(|| {
        let subs: Vec<c_int> = category(i)?.subcategories.iter().map(|&s| s as c_int).collect();
        // SAFETY: `out` holds `len` ints.
        unsafe { put_indices(&subs, len, out) }
    })
});

mpi_fn!(fn MPI_T_category_changed / PMPI_T_category_changed(n: *mut c_int) -> c_int {
    // SAFETY: output argument.
    t_run(|| { unsafe { put(n, CHANGED.load(Ordering::Relaxed)) }; Ok(()) })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_is_in_a_listed_category() {
        let names: Vec<&str> = categories().iter().map(|c| c.name.as_str()).collect();
        for c in cvar::cvars() {
            assert!(names.contains(&c.category.as_str()), "{}", c.category);
        }
        pvar::with_table(|t| {
            for p in t {
                assert!(names.contains(&p.category.as_str()), "{}", p.category);
            }
        });
        let total: usize = names.iter().map(|n| cvars_of(n).len()).sum();
        assert_eq!(total, cvar::cvars().len());
        assert!(!cvars_of("gw_tcp").is_empty());
        assert_eq!(
            categories()[0].subcategories.len(),
            gridwire_core::method::registry().len()
        );
    }
}
