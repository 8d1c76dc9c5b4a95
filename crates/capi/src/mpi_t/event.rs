//! Events (MPI 4.0): the runtime's link events ([`gridwire_core::events`]),
//! delivered to registered callbacks on the thread where they happen.
//!
//! Every event carries two ints: the peer's world rank and the method
//! (enum `gw_method`). They are raised inside the runtime, possibly with
//! the peer's connection lock held, so callbacks run at safety level
//! `MPI_T_CB_REQUIRE_MPI_RESTRICTED`: a registration's callback for that
//! level or a stricter one is called; one registered only for
//! `MPI_T_CB_REQUIRE_NONE` cannot be, and its events are counted as
//! dropped (its dropped handler is told).

use super::*;
use gridwire_core::events::{LinkEvent, LinkEventKind};
use std::cell::Cell;
use std::ffi::c_void;

pub(crate) struct EventType {
    pub name: &'static str,
    pub desc: &'static str,
    pub kind: LinkEventKind,
}

pub(crate) const EVENTS: &[EventType] = &[
    EventType {
        name: "gw_link_selected",
        desc: "A method was selected for the link to a peer (elements: peer rank, method)",
        kind: LinkEventKind::Selected,
    },
    EventType {
        name: "gw_link_connect_failed",
        desc: "A method failed to connect to a peer; the next applicable method is tried \
               (elements: peer rank, method that failed)",
        kind: LinkEventKind::ConnectFailed,
    },
    EventType {
        name: "gw_link_failed",
        desc: "The link to a peer broke; later sends to it fail (elements: peer rank, method)",
        kind: LinkEventKind::Failed,
    },
];

type EventCb = unsafe extern "C" fn(usize, usize, c_int, *mut c_void);
type FreeCb = unsafe extern "C" fn(usize, c_int, *mut c_void);
type DroppedCb = unsafe extern "C" fn(MPI_Count, usize, c_int, c_int, *mut c_void);

/// The standard's safety levels, weakest first.
const LEVELS: [c_int; 4] = [0, 3, 15, 63];

#[derive(Default)]
struct Registration {
    event: usize,
    /// A callback and its user data per safety level (see [`LEVELS`]).
    callbacks: [Option<(EventCb, usize)>; 4],
    dropped: Option<DroppedCb>,
}

impl Registration {
    /// The callback to call at safety level `level`: the one registered for
    /// the weakest level that still guarantees `level`.
    fn callback_for(&self, level: c_int) -> Option<(EventCb, usize)> {
        LEVELS
            .iter()
            .zip(&self.callbacks)
            .filter(|(l, _)| **l >= level)
            .find_map(|(_, c)| *c)
    }
}

static REGS: Mutex<Ids<Registration>> = Mutex::new(Ids::new());

pub(super) fn free_all() {
    lock(&REGS).clear();
}

/// What a callback's `MPI_T_event_instance` points to.
struct Instance {
    event: usize,
    timestamp: i64,
    elements: [c_int; 2],
}

thread_local! {
    /// The instance being delivered on this thread (0 = none): an instance
    /// handle is only valid inside its callback.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

pub(super) fn install_listener() {
    gridwire_core::events::set_link_listener(on_link);
}

fn on_link(ev: &LinkEvent<'_>) {
    let Some(event) = EVENTS.iter().position(|e| e.kind == ev.kind) else {
        return;
    };
    let mut calls = Vec::new();
    let mut dropped = Vec::new();
    for (id, r) in lock(&REGS).iter().filter(|(_, r)| r.event == event) {
        match r.callback_for(CB_REQUIRE_MPI_RESTRICTED) {
            Some((cb, ud)) => calls.push((*id, cb, ud)),
            None => {
                if let Some(d) = r.dropped {
                    let ud = r.callbacks.iter().flatten().next().map_or(0, |c| c.1);
                    dropped.push((*id, d, ud));
                }
            }
        }
    }
    if calls.is_empty() && dropped.is_empty() {
        return;
    }
    let inst = Instance {
        event,
        timestamp: now_ns(),
        elements: [ev.peer as c_int, method_value(ev.method)],
    };
    let prev = CURRENT.with(|c| c.replace(&inst as *const Instance as usize));
    for (id, cb, ud) in calls {
        // SAFETY: a function the program registered with
        // MPI_T_event_register_callback, called with the arguments the
        // standard defines; the instance lives until it returns.
        unsafe {
            cb(
                &inst as *const Instance as usize,
                id,
                CB_REQUIRE_MPI_RESTRICTED,
                ud as *mut c_void,
            )
        };
    }
    CURRENT.with(|c| c.set(prev));
    for (id, d, ud) in dropped {
        // SAFETY: a function the program registered with MPI_T_event_set_dropped_handler.
        unsafe { d(1, id, 0, CB_REQUIRE_MPI_RESTRICTED, ud as *mut c_void) };
    }
}

/// The instance behind a handle, if it is the one being delivered on this thread.
fn with_instance<R>(h: usize, f: impl FnOnce(&Instance) -> TResult<R>) -> TResult<R> {
    if h == 0 || CURRENT.with(|c| c.get()) != h {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    // SAFETY: `h` is the address of the `Instance` that `on_link` is
    // delivering on this thread; it lives until the callback returns, and
    // this call happens inside that callback.
    f(unsafe { &*(h as *const Instance) })
}

fn registered(h: usize) -> TResult {
    lock(&REGS)
        .get(h)
        .map(|_| ())
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

mpi_fn!(fn MPI_T_event_get_num / PMPI_T_event_get_num(n: *mut c_int) -> c_int {
    // SAFETY: output argument.
    t_run(|| { unsafe { put(n, EVENTS.len() as c_int) }; Ok(()) })
});

mpi_fn!(fn MPI_T_event_get_info / PMPI_T_event_get_info(i: c_int, name: *mut c_char, name_len: *mut c_int,
        verbosity: *mut c_int, types: *mut MPI_Datatype, displs: *mut MPI_Aint, num_elements: *mut c_int,
        enumtype: *mut usize, info: *mut MPI_Info, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int) -> c_int {
    t_run(|| {
        let e = &EVENTS[index(i, EVENTS.len())?];
        // SAFETY: output arguments by the MPI contract; the arrays hold
        // `*num_elements` entries on input.
        unsafe {
            put_tstr(e.name, name, name_len);
            put(verbosity, VERBOSITY_USER_BASIC);
            if !num_elements.is_null() {
                let room = *num_elements;
                let t = crate::arr_mut(types, room.min(2));
                t.iter_mut().for_each(|d| *d = MPI_INT);
                let d = crate::arr_mut(displs, room.min(2));
                for (k, x) in d.iter_mut().enumerate() {
                    *x = (k * 4) as MPI_Aint;
                }
                *num_elements = 2;
            }
            put(enumtype, METHOD_ENUM);
            if !info.is_null() {
                put(info, new_info());
            }
            put_tstr(e.desc, desc, desc_len);
            put(bind, BIND_NO_OBJECT);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_get_index / PMPI_T_event_get_index(name: *const c_char, out: *mut c_int) -> c_int {
    t_run(|| {
        // SAFETY: `name` is a C string argument.
        let i = unsafe { find_name(name, |s| EVENTS.iter().position(|e| e.name == s)) }?;
        // SAFETY: output argument.
        unsafe { put(out, i) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(i: c_int, _obj: *mut Void, _info: MPI_Info, out: *mut usize) -> c_int {
    t_run(|| {
        let event = index(i, EVENTS.len())?;
        if out.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let id = lock(&REGS).insert(Registration { event, ..Default::default() });
        // SAFETY: checked output argument.
        unsafe { *out = id };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_handle_free / PMPI_T_event_handle_free(h: usize, user_data: *mut Void, free_cb: Option<FreeCb>) -> c_int {
    t_run(|| {
        lock(&REGS).remove(h).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        if let Some(f) = free_cb {
            // SAFETY: the program's free callback with the standard's arguments.
            unsafe { f(h, CB_REQUIRE_NONE, user_data) };
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(h: usize, _info: MPI_Info) -> c_int {
    // No info key changes how events are delivered.
    t_run(|| registered(h))
});

mpi_fn!(fn MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(h: usize, info: *mut MPI_Info) -> c_int {
    t_run(|| {
        registered(h)?;
        // SAFETY: output argument.
        unsafe { put(info, new_info()) };
        Ok(())
    })
});

fn level_slot(safety: c_int) -> TResult<usize> {
    LEVELS.iter().position(|&l| l == safety).ok_or(MPI_ERR_ARG)
}

mpi_fn!(fn MPI_T_event_register_callback / PMPI_T_event_register_callback(h: usize, safety: c_int, _info: MPI_Info,
        user_data: *mut Void, cb: Option<EventCb>) -> c_int {
    t_run(|| {
        let slot = level_slot(safety)?;
        let mut g = lock(&REGS);
        let r = g.get_mut(h).ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        // A NULL callback removes the one of that level.
        r.callbacks[slot] = cb.map(|f| (f, user_data as usize));
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(h: usize, safety: c_int, _info: MPI_Info) -> c_int {
    t_run(|| {
        level_slot(safety)?;
        registered(h)
    })
});

mpi_fn!(fn MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(h: usize, safety: c_int, info: *mut MPI_Info) -> c_int {
    t_run(|| {
        level_slot(safety)?;
        registered(h)?;
        // SAFETY: output argument.
        unsafe { put(info, new_info()) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(h: usize, cb: Option<DroppedCb>) -> c_int {
    t_run(|| {
        lock(&REGS).get_mut(h).ok_or(MPI_T_ERR_INVALID_HANDLE)?.dropped = cb;
        Ok(())
    })
});

mpi_fn!(fn MPI_T_event_read / PMPI_T_event_read(inst: usize, element: c_int, buf: *mut Void) -> c_int {
    t_run(|| with_instance(inst, |i| {
        let k = index(element, i.elements.len())?;
        if buf.is_null() {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: the buffer holds one element's type (an int).
        unsafe { (buf as *mut c_int).write_unaligned(i.elements[k]) };
        Ok(())
    }))
});

mpi_fn!(fn MPI_T_event_copy / PMPI_T_event_copy(inst: usize, buf: *mut Void) -> c_int {
    t_run(|| with_instance(inst, |i| {
        if buf.is_null() {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: the buffer holds the event's elements at the displacements
        // MPI_T_event_get_info gave (two ints, 0 and 4).
        unsafe {
            (buf as *mut c_int).write_unaligned(i.elements[0]);
            (buf as *mut c_int).add(1).write_unaligned(i.elements[1]);
        }
        Ok(())
    }))
});

mpi_fn!(fn MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(inst: usize, ts: *mut MPI_Count) -> c_int {
    t_run(|| with_instance(inst, |i| {
        // SAFETY: output argument.
        unsafe { put(ts, i.timestamp) };
        Ok(())
    }))
});

mpi_fn!(fn MPI_T_event_get_source / PMPI_T_event_get_source(inst: usize, src: *mut c_int) -> c_int {
    t_run(|| with_instance(inst, |i| {
        let _ = i.event;
        // SAFETY: output argument.
        unsafe { put(src, 0) };
        Ok(())
    }))
});

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn cb(_: usize, _: usize, _: c_int, _: *mut c_void) {}

    #[test]
    fn the_weakest_sufficient_callback_is_chosen() {
        let mut r = Registration::default();
        assert!(r.callback_for(CB_REQUIRE_MPI_RESTRICTED).is_none());
        r.callbacks[0] = Some((cb, 1));
        assert!(r.callback_for(CB_REQUIRE_MPI_RESTRICTED).is_none());
        r.callbacks[3] = Some((cb, 3));
        assert_eq!(r.callback_for(CB_REQUIRE_MPI_RESTRICTED).unwrap().1, 3);
        r.callbacks[1] = Some((cb, 2));
        assert_eq!(r.callback_for(CB_REQUIRE_MPI_RESTRICTED).unwrap().1, 2);
        assert_eq!(r.callback_for(CB_REQUIRE_NONE).unwrap().1, 1);
    }

    #[test]
    fn an_instance_handle_is_valid_only_during_its_callback() {
        assert_eq!(with_instance(0, |_| Ok(())), Err(MPI_T_ERR_INVALID_HANDLE));
        assert_eq!(
            with_instance(0x1000, |_| Ok(())),
            Err(MPI_T_ERR_INVALID_HANDLE)
        );
    }

    #[test]
    fn every_core_event_kind_has_a_type() {
        for k in [
            LinkEventKind::Selected,
            LinkEventKind::ConnectFailed,
            LinkEventKind::Failed,
        ] {
            assert_eq!(EVENTS.iter().filter(|e| e.kind == k).count(), 1);
        }
    }
}
