//! Performance variables: the runtime's per-link and per-method statistics
//! and the MPI layer's unexpected-message accounting.
//!
//! Counters are not continuous: a handle counts only while it is started
//! (as the standard describes), from a baseline taken at start, and may be
//! reset or written (its own offset; the runtime's counters are never
//! changed). Levels, states and sizes are continuous and read-only.

use super::*;

pub(crate) const CLASS_STATE: c_int = 1;
pub(crate) const CLASS_LEVEL: c_int = 2;
pub(crate) const CLASS_SIZE: c_int = 3;
pub(crate) const CLASS_HIGHWATERMARK: c_int = 5;
pub(crate) const CLASS_COUNTER: c_int = 7;

/// Where a variable's values come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Per peer: the method of the link (enum `gw_method`).
    LinkMethod,
    /// Per peer: field 0..4 of the link's statistics (sent msgs, sent bytes, recv msgs, recv bytes).
    Link(usize),
    /// One method's total of a link field, over the links it carries.
    MethodTotal(&'static str, usize),
    /// Peers whose link uses the method.
    MethodLinks(&'static str),
    /// A method's own counter (`Method::counters`).
    MethodCounter(&'static str, &'static str),
    DroppedRequests,
    Rejected,
    HeldBytes,
    HeldBytesMax,
    /// Bound to a communicator: its unexpected messages.
    CommUnexpected,
    HeldLimit,
    /// One-sided get answers the transport read straight into the result buffer.
    RmaPlacedAnswers,
    RmaPlacedPuts,
}

pub(crate) struct Pvar {
    pub name: String,
    pub desc: String,
    pub class: c_int,
    pub category: String,
    pub src: Source,
}

const LINK_FIELDS: [(&str, &str); 4] = [
    ("sent_msgs", "messages sent"),
    (
        "sent_bytes",
        "bytes sent (with the runtime's 8-byte header)",
    ),
    ("recv_msgs", "messages received"),
    (
        "recv_bytes",
        "bytes received (with the runtime's 8-byte header)",
    ),
];

impl Pvar {
    fn new(name: String, class: c_int, category: &str, src: Source, desc: String) -> Pvar {
        Pvar {
            name,
            desc,
            class,
            category: category.into(),
            src,
        }
    }

    pub fn bind(&self) -> c_int {
        if self.src == Source::CommUnexpected {
            BIND_MPI_COMM
        } else {
            BIND_NO_OBJECT
        }
    }

    pub fn per_peer(&self) -> bool {
        matches!(self.src, Source::LinkMethod | Source::Link(_))
    }
    pub fn continuous(&self) -> bool {
        self.class != CLASS_COUNTER
    }
    pub fn readonly(&self) -> bool {
        self.class != CLASS_COUNTER
    }
    /// A single value is sampled with one load: reading and resetting it is atomic.
    pub fn atomic(&self) -> bool {
        !self.per_peer()
    }
    pub fn datatype(&self) -> MPI_Datatype {
        if self.class == CLASS_STATE {
            MPI_INT
        } else {
            MPI_UNSIGNED_LONG_LONG
        }
    }
    pub fn enumtype(&self) -> usize {
        if self.class == CLASS_STATE {
            METHOD_ENUM
        } else {
            0
        }
    }
    pub fn elem_size(&self) -> usize {
        if self.class == CLASS_STATE {
            4
        } else {
            8
        }
    }
}

fn static_table() -> Vec<Pvar> {
    let mut v = vec![Pvar::new(
        "gw_link_method".into(),
        CLASS_STATE,
        "gw_core",
        Source::LinkMethod,
        "Per peer rank: the method selected for the link to it (enum gw_method; none = no link yet)".into(),
    )];
    for (i, (f, d)) in LINK_FIELDS.iter().enumerate() {
        v.push(Pvar::new(
            format!("gw_link_{f}"),
            CLASS_COUNTER,
            "gw_core",
            Source::Link(i),
            format!("Per peer rank: {d} on the link with it"),
        ));
    }
    v.push(Pvar::new(
        "gw_core_dropped_requests".into(),
        CLASS_COUNTER,
        "gw_core",
        Source::DroppedRequests,
        "Requests dropped because their endpoint or handler did not exist".into(),
    ));
    for m in gridwire_core::method::registry() {
        let cat = format!("gw_{}", m.name);
        for (i, (f, d)) in LINK_FIELDS.iter().enumerate() {
            v.push(Pvar::new(format!("gw_{}_{f}", m.name), CLASS_COUNTER, &cat, Source::MethodTotal(m.name, i),
                format!("{d} over the links the {} method carries (received ones counted on the link to their sender)", m.name)));
        }
        v.push(Pvar::new(
            format!("gw_{}_links", m.name),
            CLASS_LEVEL,
            &cat,
            Source::MethodLinks(m.name),
            format!("Peers whose link is carried by the {} method", m.name),
        ));
    }
    v.push(Pvar::new(
        "gw_mpi_rejected_messages".into(),
        CLASS_COUNTER,
        "gw_mpi",
        Source::Rejected,
        "Messages dropped because they broke the protocol or the unexpected-message limit".into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_unexpected_bytes".into(),
        CLASS_LEVEL,
        "gw_mpi",
        Source::HeldBytes,
        "Bytes of messages held because their receive is not posted yet".into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_comm_unexpected_msgs".into(),
        CLASS_LEVEL,
        "gw_mpi",
        Source::CommUnexpected,
        "Bound to a communicator: its point-to-point messages that arrived before their receive"
            .into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_unexpected_bytes_max".into(),
        CLASS_HIGHWATERMARK,
        "gw_mpi",
        Source::HeldBytesMax,
        "The most bytes of messages held at once for receives not posted yet, since MPI_Init"
            .into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_unexpected_limit".into(),
        CLASS_SIZE,
        "gw_mpi",
        Source::HeldLimit,
        "The limit of held unexpected bytes in force (GW_MPI_UNEXPECTED_LIMIT)".into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_rma_placed_answers".into(),
        CLASS_COUNTER,
        "gw_mpi",
        Source::RmaPlacedAnswers,
        "Answers of one-sided gets (and fetching operations) that a stream method (tcp) read straight into the result buffer"
            .into(),
    ));
    v.push(Pvar::new(
        "gw_mpi_rma_placed_puts".into(),
        CLASS_COUNTER,
        "gw_mpi",
        Source::RmaPlacedPuts,
        "One-sided puts that a stream method (tcp) read straight into this process's window memory"
            .into(),
    ));
    v
}

struct Table {
    vars: Vec<Pvar>,
    /// The methods' own counters were appended (they are known once MPI_Init ran).
    counters_added: bool,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The variables, with the methods' counters appended once MPI is up
/// (indices never change: the table only grows, as the standard allows).
pub(crate) fn with_table<R>(f: impl FnOnce(&[Pvar]) -> R) -> R {
    let mut g = lock(&TABLE);
    let t = g.get_or_insert_with(|| Table {
        vars: static_table(),
        counters_added: false,
    });
    if !t.counters_added {
        if let Some(m) = crate::handles::MPI.get() {
            for (meth, counter, _) in m.ctx().method_counters() {
                t.vars.push(Pvar::new(
                    format!("gw_{meth}_{counter}"),
                    CLASS_COUNTER,
                    &format!("gw_{meth}"),
                    Source::MethodCounter(meth, counter),
                    format!("The {meth} method's {} counter", counter.replace('_', " ")),
                ));
            }
            t.counters_added = true;
            super::category::changed();
        }
    }
    f(&t.vars)
}

/// Elements of a variable: one per world rank for per-peer ones (needs MPI).
fn count_of(p: &Pvar) -> TResult<usize> {
    if !p.per_peer() {
        return Ok(1);
    }
    crate::handles::MPI
        .get()
        .map(|m| m.world.size as usize)
        .ok_or(MPI_T_ERR_NOT_ACCESSIBLE)
}

/// The runtime's current values of a variable (zeros before MPI_Init).
fn sample(src: &Source, count: usize, bound: u32) -> Vec<u64> {
    let Some(m) = crate::handles::MPI.get() else {
        return vec![0; count];
    };
    let ctx = m.ctx();
    let field = |s: &gridwire_core::LinkStats, i: usize| match i {
        0 => s.sent_msgs,
        1 => s.sent_bytes,
        2 => s.recv_msgs,
        _ => s.recv_bytes,
    };
    match src {
        Source::LinkMethod => (0..count as u32)
            .map(|r| ctx.method_to(r).map_or(0, method_value) as u64)
            .collect(),
        Source::Link(i) => {
            let mut v = vec![0; count];
            for s in ctx.link_stats() {
                if let Some(slot) = v.get_mut(s.peer as usize) {
                    *slot = field(&s, *i);
                }
            }
            v
        }
        Source::MethodTotal(meth, i) => {
            vec![ctx
                .link_stats()
                .iter()
                .filter(|s| s.method == *meth)
                .map(|s| field(s, *i))
                .sum()]
        }
        Source::MethodLinks(meth) => {
            vec![(0..m.world.size)
                .filter(|&r| ctx.method_to(r) == Some(*meth))
                .count() as u64]
        }
        Source::MethodCounter(meth, counter) => vec![ctx
            .method_counters()
            .into_iter()
            .find(|(mm, c, _)| mm == meth && c == counter)
            .map_or(0, |(_, _, v)| v)],
        Source::DroppedRequests => vec![ctx.dropped_requests()],
        Source::Rejected => vec![m.engine.rejected()],
        Source::HeldBytes => vec![m.engine.held_bytes() as u64],
        Source::HeldBytesMax => vec![m.engine.held_bytes_max() as u64],
        Source::CommUnexpected => vec![m.engine.unexpected_count(bound) as u64],
        Source::HeldLimit => vec![m.engine.held_limit() as u64],
        Source::RmaPlacedAnswers => vec![m.rma.placed_answers()],
        Source::RmaPlacedPuts => vec![m.rma.placed_puts()],
    }
}

/// One handle's view of a counter: what it accumulated while started, and
/// the runtime's values when it was last started (or reset, or written).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Counting {
    pub started: bool,
    pub base: Vec<u64>,
    pub accum: Vec<u64>,
}

impl Counting {
    pub fn new(n: usize) -> Self {
        Counting {
            started: false,
            base: vec![0; n],
            accum: vec![0; n],
        }
    }
    pub fn start(&mut self, raw: &[u64]) {
        if !self.started {
            self.base = raw.to_vec();
            self.started = true;
        }
    }
    pub fn stop(&mut self, raw: &[u64]) {
        if self.started {
            self.accum = self.read(raw);
            self.started = false;
        }
    }
    pub fn read(&self, raw: &[u64]) -> Vec<u64> {
        self.accum
            .iter()
            .zip(&self.base)
            .zip(raw)
            .map(|((a, b), r)| {
                if self.started {
                    a.wrapping_add(r.wrapping_sub(*b))
                } else {
                    *a
                }
            })
            .collect()
    }
    /// Sets the handle's values to `v` from now on (a reset is `v` = zeros).
    pub fn write(&mut self, v: &[u64], raw: &[u64]) {
        self.accum = v.to_vec();
        self.base = raw.to_vec();
    }
}

struct PHandle {
    session: usize,
    var: usize,
    count: usize,
    /// The point-to-point context id of the communicator a
    /// communicator-bound variable's handle was allocated for.
    bound: u32,
    counting: Counting,
}

struct Sessions {
    sessions: Ids<()>,
    handles: Ids<PHandle>,
}

static SESSIONS: Mutex<Sessions> = Mutex::new(Sessions {
    sessions: Ids::new(),
    handles: Ids::new(),
});

pub(super) fn free_all() {
    let mut s = lock(&SESSIONS);
    s.sessions.clear();
    s.handles.clear();
}

const ALL_HANDLES: usize = 1;

/// Runs `f` on handle `h` of session `s` with the variable's source and fresh samples.
fn on_handle<R>(
    s: usize,
    h: usize,
    f: impl FnOnce(&mut PHandle, &Pvar, &[u64]) -> TResult<R>,
) -> TResult<R> {
    let mut g = lock(&SESSIONS);
    if g.sessions.get(s).is_none() {
        return Err(MPI_T_ERR_INVALID_SESSION);
    }
    let ph = g
        .handles
        .get_mut(h)
        .filter(|p| p.session == s)
        .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    with_table(|t| {
        let p = &t[ph.var];
        let raw = sample(&p.src, ph.count, ph.bound);
        f(ph, p, &raw)
    })
}

/// Applies `f` to every handle of session `s` that `applies` to (for `MPI_T_PVAR_ALL_HANDLES`).
fn on_all(s: usize, applies: fn(&Pvar) -> bool, f: fn(&mut Counting, &[u64])) -> TResult {
    let mut g = lock(&SESSIONS);
    if g.sessions.get(s).is_none() {
        return Err(MPI_T_ERR_INVALID_SESSION);
    }
    with_table(|t| {
        for (_, ph) in g.handles.iter_mut().filter(|(_, p)| p.session == s) {
            let p = &t[ph.var];
            if applies(p) {
                let raw = sample(&p.src, ph.count, ph.bound);
                f(&mut ph.counting, &raw);
            }
        }
    });
    Ok(())
}

/// Copies values into a C buffer of the variable's type.
///
/// # Safety
/// `buf` holds `vals.len()` elements of the variable's type.
unsafe fn store(p: &Pvar, vals: &[u64], buf: *mut Void) -> TResult {
    if buf.is_null() {
        return Err(MPI_ERR_ARG);
    }
    for (i, v) in vals.iter().enumerate() {
        // SAFETY: element i < count of the buffer by the caller's contract.
        unsafe {
            if p.elem_size() == 4 {
                (buf as *mut c_int).add(i).write_unaligned(*v as c_int);
            } else {
                (buf as *mut u64).add(i).write_unaligned(*v);
            }
        }
    }
    Ok(())
}

fn current(ph: &PHandle, p: &Pvar, raw: &[u64]) -> Vec<u64> {
    if p.continuous() {
        raw.to_vec()
    } else {
        ph.counting.read(raw)
    }
}

mpi_fn!(fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(n: *mut c_int) -> c_int {
    t_run(|| {
        let len = with_table(|t| t.len());
        // SAFETY: output argument.
        unsafe { put(n, len as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(i: c_int, name: *mut c_char, name_len: *mut c_int,
        verbosity: *mut c_int, var_class: *mut c_int, datatype: *mut MPI_Datatype, enumtype: *mut usize,
        desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, readonly: *mut c_int,
        continuous: *mut c_int, atomic: *mut c_int) -> c_int {
    t_run(|| with_table(|t| {
        let p = &t[index(i, t.len())?];
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put_tstr(&p.name, name, name_len);
            put(verbosity, if p.per_peer() { VERBOSITY_TUNER_DETAIL } else { VERBOSITY_USER_BASIC });
            put(var_class, p.class);
            put(datatype, p.datatype());
            put(enumtype, p.enumtype());
            put_tstr(&p.desc, desc, desc_len);
            put(bind, p.bind());
            put(readonly, p.readonly() as c_int);
            put(continuous, p.continuous() as c_int);
            put(atomic, p.atomic() as c_int);
        }
        Ok(())
    }))
});

mpi_fn!(fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_char, class: c_int, out: *mut c_int) -> c_int {
    t_run(|| {
        // SAFETY: `name` is a C string argument.
        let i = with_table(|t| unsafe { find_name(name, |s| t.iter().position(|p| p.name == s && p.class == class)) })?;
        // SAFETY: output argument.
        unsafe { put(out, i) };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(s: *mut usize) -> c_int {
    t_run(|| {
        if s.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let id = lock(&SESSIONS).sessions.insert(());
        // SAFETY: checked output argument.
        unsafe { *s = id };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(s: *mut usize) -> c_int {
    t_run(|| {
        if s.is_null() {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        // SAFETY: checked in/out argument.
        let id = unsafe { *s };
        let mut g = lock(&SESSIONS);
        g.sessions.remove(id).ok_or(MPI_T_ERR_INVALID_SESSION)?;
        g.handles.retain(|_, p| p.session != id);
        // SAFETY: as above; MPI_T_PVAR_SESSION_NULL is 0.
        unsafe { *s = 0 };
        Ok(())
    })
});

/// The point-to-point context of the communicator `obj` points to.
///
/// # Safety
/// `obj` is NULL or points to an `MPI_Comm`.
unsafe fn bound_comm(obj: *mut Void) -> TResult<u32> {
    if obj.is_null() {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    // SAFETY: the caller's contract.
    let h = unsafe { (obj as *const MPI_Comm).read_unaligned() };
    crate::handles::comm(h)
        .map(|c| c.ctx)
        .map_err(|_| MPI_T_ERR_INVALID_HANDLE)
}

mpi_fn!(fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(s: usize, i: c_int, obj: *mut Void, h: *mut usize, count: *mut c_int) -> c_int {
    t_run(|| {
        if lock(&SESSIONS).sessions.get(s).is_none() {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        let (var, n, bind) = with_table(|t| {
            let var = index(i, t.len())?;
            Ok::<_, c_int>((var, count_of(&t[var])?, t[var].bind()))
        })?;
        // SAFETY: for a communicator-bound variable `obj` points to an MPI_Comm.
        let bound = if bind == BIND_MPI_COMM { unsafe { bound_comm(obj) }? } else { 0 };
        if h.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let mut g = lock(&SESSIONS);
        if g.sessions.get(s).is_none() {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        // Variables bound to no object ignore the object argument.
        let id = g.handles.insert(PHandle { session: s, var, count: n, bound, counting: Counting::new(n) });
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put(h, id);
            put(count, n as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(s: usize, h: *mut usize) -> c_int {
    t_run(|| {
        if h.is_null() {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        // SAFETY: checked in/out argument.
        let id = unsafe { *h };
        let mut g = lock(&SESSIONS);
        if g.sessions.get(s).is_none() {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        if g.handles.get(id).is_none_or(|p| p.session != s) {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        g.handles.remove(id);
        // SAFETY: as above; MPI_T_PVAR_HANDLE_NULL is 0.
        unsafe { *h = 0 };
        Ok(())
    })
});

mpi_fn!(fn MPI_T_pvar_start / PMPI_T_pvar_start(s: usize, h: usize) -> c_int {
    t_run(|| {
        if h == ALL_HANDLES {
            return on_all(s, |p| !p.continuous(), |c, raw| c.start(raw));
        }
        on_handle(s, h, |ph, p, raw| {
            if p.continuous() {
                return Err(MPI_T_ERR_PVAR_NO_STARTSTOP);
            }
            ph.counting.start(raw);
            Ok(())
        })
    })
});

mpi_fn!(fn MPI_T_pvar_stop / PMPI_T_pvar_stop(s: usize, h: usize) -> c_int {
    t_run(|| {
        if h == ALL_HANDLES {
            return on_all(s, |p| !p.continuous(), |c, raw| c.stop(raw));
        }
        on_handle(s, h, |ph, p, raw| {
            if p.continuous() {
                return Err(MPI_T_ERR_PVAR_NO_STARTSTOP);
            }
            ph.counting.stop(raw);
            Ok(())
        })
    })
});

mpi_fn!(fn MPI_T_pvar_read / PMPI_T_pvar_read(s: usize, h: usize, buf: *mut Void) -> c_int {
    t_run(|| {
        on_handle(s, h, |ph, p, raw| {
            // SAFETY: the buffer holds `count` elements of the variable's type.
            unsafe { store(p, &current(ph, p, raw), buf) }
        })
    })
});

mpi_fn!(fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(s: usize, h: usize, buf: *mut Void) -> c_int {
    t_run(|| {
        on_handle(s, h, |ph, p, raw| {
            if p.readonly() {
                return Err(MPI_T_ERR_PVAR_NO_WRITE);
            }
            if !p.atomic() {
                return Err(MPI_T_ERR_PVAR_NO_ATOMIC);
            }
            // SAFETY: the buffer holds `count` elements of the variable's type.
            unsafe { store(p, &current(ph, p, raw), buf) }?;
            ph.counting.write(&vec![0; ph.count], raw);
            Ok(())
        })
    })
});

mpi_fn!(fn MPI_T_pvar_reset / PMPI_T_pvar_reset(s: usize, h: usize) -> c_int {
    t_run(|| {
        if h == ALL_HANDLES {
            return on_all(s, |p| !p.readonly(), |c, raw| c.write(&vec![0; raw.len()], raw));
        }
        on_handle(s, h, |ph, p, raw| {
            if p.readonly() {
                return Err(MPI_T_ERR_PVAR_NO_WRITE);
            }
            ph.counting.write(&vec![0; ph.count], raw);
            Ok(())
        })
    })
});

mpi_fn!(fn MPI_T_pvar_write / PMPI_T_pvar_write(s: usize, h: usize, buf: *const Void) -> c_int {
    t_run(|| {
        on_handle(s, h, |ph, p, raw| {
            if p.readonly() {
                return Err(MPI_T_ERR_PVAR_NO_WRITE);
            }
            if buf.is_null() {
                return Err(MPI_ERR_ARG);
            }
            // SAFETY: the buffer holds `count` unsigned long longs (counters' type).
            let v: Vec<u64> = (0..ph.count).map(|i| unsafe { (buf as *const u64).add(i).read_unaligned() }).collect();
            ph.counting.write(&v, raw);
            Ok(())
        })
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_counts_only_while_started() {
        let mut c = Counting::new(2);
        assert_eq!(c.read(&[10, 20]), vec![0, 0]);
        c.start(&[10, 20]);
        assert_eq!(c.read(&[15, 20]), vec![5, 0]);
        c.stop(&[16, 21]);
        assert_eq!(c.read(&[100, 100]), vec![6, 1]);
        c.start(&[100, 100]);
        assert_eq!(c.read(&[101, 100]), vec![7, 1]);
        c.write(&[0, 0], &[101, 100]);
        assert_eq!(c.read(&[103, 100]), vec![2, 0]);
    }

    #[test]
    fn table_has_every_method_and_unique_names() {
        with_table(|t| {
            for m in gridwire_core::method::registry() {
                assert!(t
                    .iter()
                    .any(|p| p.name == format!("gw_{}_sent_bytes", m.name)));
            }
            for p in t {
                assert_eq!(
                    t.iter().filter(|q| q.name == p.name).count(),
                    1,
                    "{}",
                    p.name
                );
            }
            let lm = t.iter().find(|p| p.name == "gw_link_method").unwrap();
            assert!(lm.per_peer() && lm.continuous() && lm.readonly());
            assert_eq!(lm.enumtype(), METHOD_ENUM);
        });
    }

    #[test]
    fn per_peer_variables_need_mpi() {
        with_table(|t| {
            let lm = t.iter().find(|p| p.name == "gw_link_sent_bytes").unwrap();
            assert_eq!(count_of(lm), Err(MPI_T_ERR_NOT_ACCESSIBLE));
            assert_eq!(sample(&lm.src, 3, 0), vec![0, 0, 0]);
            let cu = t
                .iter()
                .find(|p| p.name == "gw_mpi_comm_unexpected_msgs")
                .unwrap();
            assert_eq!(cu.bind(), BIND_MPI_COMM);
            assert!(t.iter().filter(|p| p.bind() == BIND_MPI_COMM).count() == 1);
        });
    }
}
