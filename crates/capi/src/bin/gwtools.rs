//! `gwtools`: lists every MPI_T variable of gridwire's MPI library through
//! the MPI_T functions themselves, as any tool would see them: control
//! variables (every `GW_*` parameter, with its value and whether it can be
//! written), performance variables, categories and events.
//!
//!     gwtools            before MPI_Init (values of this environment)
//!     gwtools --init     as a singleton MPI process: adds the methods' own
//!                        counters and shows performance variables' values
//!
//! Also reachable as `gwinfo --mpi-t`.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void, CStr};

// The library's own exports (this binary links the capi crate): the tool
// goes through exactly the C entry points a C tool would call.
use mpi as _;

type Handle = usize;
extern "C" {
    fn MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int;
    fn MPI_T_finalize() -> c_int;
    fn MPI_T_cvar_get_num(n: *mut c_int) -> c_int;
    fn MPI_T_cvar_get_info(
        i: c_int,
        name: *mut c_char,
        nl: *mut c_int,
        verb: *mut c_int,
        dt: *mut Handle,
        en: *mut Handle,
        desc: *mut c_char,
        dl: *mut c_int,
        bind: *mut c_int,
        scope: *mut c_int,
    ) -> c_int;
    fn MPI_T_cvar_handle_alloc(
        i: c_int,
        obj: *mut c_void,
        h: *mut Handle,
        count: *mut c_int,
    ) -> c_int;
    fn MPI_T_cvar_handle_free(h: *mut Handle) -> c_int;
    fn MPI_T_cvar_read(h: Handle, buf: *mut c_void) -> c_int;
    fn MPI_T_enum_get_item(
        e: Handle,
        i: c_int,
        v: *mut c_int,
        name: *mut c_char,
        nl: *mut c_int,
    ) -> c_int;
    fn MPI_T_pvar_get_num(n: *mut c_int) -> c_int;
    fn MPI_T_pvar_get_info(
        i: c_int,
        name: *mut c_char,
        nl: *mut c_int,
        verb: *mut c_int,
        class: *mut c_int,
        dt: *mut Handle,
        en: *mut Handle,
        desc: *mut c_char,
        dl: *mut c_int,
        bind: *mut c_int,
        ro: *mut c_int,
        cont: *mut c_int,
        atomic: *mut c_int,
    ) -> c_int;
    fn MPI_T_pvar_session_create(s: *mut Handle) -> c_int;
    fn MPI_T_pvar_session_free(s: *mut Handle) -> c_int;
    fn MPI_T_pvar_handle_alloc(
        s: Handle,
        i: c_int,
        obj: *mut c_void,
        h: *mut Handle,
        count: *mut c_int,
    ) -> c_int;
    fn MPI_T_pvar_start(s: Handle, h: Handle) -> c_int;
    fn MPI_T_pvar_read(s: Handle, h: Handle, buf: *mut c_void) -> c_int;
    fn MPI_T_category_get_num(n: *mut c_int) -> c_int;
    fn MPI_T_category_get_info(
        i: c_int,
        name: *mut c_char,
        nl: *mut c_int,
        desc: *mut c_char,
        dl: *mut c_int,
        nc: *mut c_int,
        np: *mut c_int,
        ns: *mut c_int,
    ) -> c_int;
    fn MPI_T_category_get_num_events(i: c_int, n: *mut c_int) -> c_int;
    fn MPI_T_event_get_num(n: *mut c_int) -> c_int;
    fn MPI_T_event_get_info(
        i: c_int,
        name: *mut c_char,
        nl: *mut c_int,
        verb: *mut c_int,
        types: *mut Handle,
        displs: *mut isize,
        ne: *mut c_int,
        en: *mut Handle,
        info: *mut Handle,
        desc: *mut c_char,
        dl: *mut c_int,
        bind: *mut c_int,
    ) -> c_int;
    fn MPI_Init(argc: *mut c_int, argv: *mut c_void) -> c_int;
    fn MPI_Finalize() -> c_int;
}

const MPI_INT: Handle = 521;
const MPI_UNSIGNED_LONG_LONG: Handle = 527;
const MPI_CHAR: Handle = 579;
const MPI_COMM_WORLD: Handle = 257;
const BIND_MPI_COMM: c_int = 2;

fn ok(what: &str, rc: c_int) {
    if rc != 0 {
        eprintln!("gwtools: {what} failed with error class {rc}");
        std::process::exit(1);
    }
}

/// A name and description buffer pair.
struct Text {
    name: [c_char; 256],
    nl: c_int,
    desc: Vec<c_char>,
    dl: c_int,
}

impl Text {
    fn new() -> Self {
        Text {
            name: [0; 256],
            nl: 256,
            desc: vec![0; 4096],
            dl: 4096,
        }
    }
    fn name(&self) -> String {
        // SAFETY: the library NUL-terminates what it stores.
        unsafe { CStr::from_ptr(self.name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
    fn desc(&self) -> String {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(self.desc.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

fn enum_item(en: Handle, v: c_int) -> String {
    let mut t = Text::new();
    let mut val = 0;
    // SAFETY: buffers of the sizes passed.
    if unsafe { MPI_T_enum_get_item(en, v, &mut val, t.name.as_mut_ptr(), &mut t.nl) } != 0 {
        return v.to_string();
    }
    t.name()
}

fn scope_name(s: c_int) -> &'static str {
    match s {
        1 => "constant",
        2 => "read-only",
        3 => "local",
        4 => "group",
        5 => "group-eq",
        6 => "all",
        7 => "all-eq",
        _ => "?",
    }
}

fn class_name(c: c_int) -> &'static str {
    match c {
        1 => "state",
        2 => "level",
        3 => "size",
        4 => "percentage",
        5 => "highwatermark",
        6 => "lowwatermark",
        7 => "counter",
        8 => "aggregate",
        9 => "timer",
        _ => "generic",
    }
}

fn cvars() {
    let mut n = 0;
    // SAFETY: output argument.
    ok("MPI_T_cvar_get_num", unsafe { MPI_T_cvar_get_num(&mut n) });
    println!("Control variables ({n}): name, type, scope, value; writable ones can be set with MPI_T_cvar_write");
    for i in 0..n {
        let mut t = Text::new();
        let (mut verb, mut dt, mut en, mut bind, mut scope) = (0, 0, 0, 0, 0);
        // SAFETY: buffers of the sizes passed, output arguments.
        ok("MPI_T_cvar_get_info", unsafe {
            MPI_T_cvar_get_info(
                i,
                t.name.as_mut_ptr(),
                &mut t.nl,
                &mut verb,
                &mut dt,
                &mut en,
                t.desc.as_mut_ptr(),
                &mut t.dl,
                &mut bind,
                &mut scope,
            )
        });
        let (mut h, mut count) = (0, 0);
        // SAFETY: output arguments.
        ok("MPI_T_cvar_handle_alloc", unsafe {
            MPI_T_cvar_handle_alloc(i, std::ptr::null_mut(), &mut h, &mut count)
        });
        let mut buf = vec![0u8; (count.max(1) as usize) * 8];
        // SAFETY: the buffer holds `count` elements of any of the variable's types.
        ok("MPI_T_cvar_read", unsafe {
            MPI_T_cvar_read(h, buf.as_mut_ptr() as *mut c_void)
        });
        // SAFETY: handle from alloc.
        ok("MPI_T_cvar_handle_free", unsafe {
            MPI_T_cvar_handle_free(&mut h)
        });
        let (ty, value) = match dt {
            MPI_UNSIGNED_LONG_LONG => (
                "unsigned long long",
                u64::from_ne_bytes(buf[..8].try_into().unwrap()).to_string(),
            ),
            MPI_INT => {
                let v = c_int::from_ne_bytes(buf[..4].try_into().unwrap());
                if en != 0 {
                    ("enum", enum_item(en, v))
                } else {
                    ("int", v.to_string())
                }
            }
            MPI_CHAR => {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                (
                    "char",
                    format!("{:?}", String::from_utf8_lossy(&buf[..end])),
                )
            }
            _ => ("?", String::new()),
        };
        println!(
            "  {:<28} {:<18} {:<9} = {value}",
            t.name(),
            ty,
            scope_name(scope)
        );
        println!("      {}", t.desc());
    }
}

fn pvars(values: bool) {
    let mut n = 0;
    // SAFETY: output argument.
    ok("MPI_T_pvar_get_num", unsafe { MPI_T_pvar_get_num(&mut n) });
    println!(
        "\nPerformance variables ({n}): name, class, flags{}",
        if values { ", value" } else { "" }
    );
    let mut session = 0;
    if values {
        // SAFETY: output argument.
        ok("MPI_T_pvar_session_create", unsafe {
            MPI_T_pvar_session_create(&mut session)
        });
    }
    for i in 0..n {
        let mut t = Text::new();
        let (mut verb, mut class, mut dt, mut en, mut bind, mut ro, mut cont, mut at) =
            (0, 0, 0, 0, 0, 0, 0, 0);
        // SAFETY: buffers of the sizes passed, output arguments.
        ok("MPI_T_pvar_get_info", unsafe {
            MPI_T_pvar_get_info(
                i,
                t.name.as_mut_ptr(),
                &mut t.nl,
                &mut verb,
                &mut class,
                &mut dt,
                &mut en,
                t.desc.as_mut_ptr(),
                &mut t.dl,
                &mut bind,
                &mut ro,
                &mut cont,
                &mut at,
            )
        });
        let flags = format!(
            "{}{}{}",
            if ro != 0 { "read-only " } else { "" },
            if cont != 0 {
                "continuous "
            } else {
                "startable "
            },
            if at != 0 { "atomic" } else { "" }
        );
        let mut shown = String::new();
        if values {
            let (mut h, mut count) = (0, 0);
            // Variables bound to a communicator are shown for MPI_COMM_WORLD.
            let mut world: Handle = MPI_COMM_WORLD;
            let obj = if bind == BIND_MPI_COMM {
                &mut world as *mut Handle as *mut c_void
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: output arguments; `obj` is NULL or points to an MPI_Comm.
            if unsafe { MPI_T_pvar_handle_alloc(session, i, obj, &mut h, &mut count) } == 0 {
                let mut buf = vec![0u64; count.max(1) as usize];
                // SAFETY: continuous ones are already started; the buffer holds `count` elements.
                unsafe {
                    if cont == 0 {
                        MPI_T_pvar_start(session, h);
                    }
                    MPI_T_pvar_read(session, h, buf.as_mut_ptr() as *mut c_void);
                }
                let vals: Vec<String> = if dt == MPI_INT {
                    let ints: &[c_int] = &bytemuck_ints(&buf)[..count as usize];
                    ints.iter()
                        .map(|&v| {
                            if en != 0 {
                                enum_item(en, v)
                            } else {
                                v.to_string()
                            }
                        })
                        .collect()
                } else {
                    buf.iter().map(|v| v.to_string()).collect()
                };
                shown = format!(" = {}", vals.join(" "));
            }
        }
        let bound = if bind == BIND_MPI_COMM {
            "per communicator "
        } else {
            ""
        };
        println!(
            "  {:<36} {:<13} {bound}{flags}{shown}",
            t.name(),
            class_name(class)
        );
        println!("      {}", t.desc());
    }
    if values {
        // SAFETY: the session created above.
        ok("MPI_T_pvar_session_free", unsafe {
            MPI_T_pvar_session_free(&mut session)
        });
    }
}

/// The ints stored in a buffer of u64 (4-byte elements, native order).
fn bytemuck_ints(buf: &[u64]) -> Vec<c_int> {
    buf.iter()
        .flat_map(|w| {
            w.to_ne_bytes()
                .chunks(4)
                .map(|c| c_int::from_ne_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn categories() {
    let mut n = 0;
    // SAFETY: output argument.
    ok("MPI_T_category_get_num", unsafe {
        MPI_T_category_get_num(&mut n)
    });
    println!("\nCategories ({n}):");
    for i in 0..n {
        let mut t = Text::new();
        let (mut nc, mut np, mut ns, mut ne) = (0, 0, 0, 0);
        // SAFETY: buffers of the sizes passed, output arguments.
        ok("MPI_T_category_get_info", unsafe {
            MPI_T_category_get_info(
                i,
                t.name.as_mut_ptr(),
                &mut t.nl,
                t.desc.as_mut_ptr(),
                &mut t.dl,
                &mut nc,
                &mut np,
                &mut ns,
            )
        });
        // SAFETY: output argument.
        ok("MPI_T_category_get_num_events", unsafe {
            MPI_T_category_get_num_events(i, &mut ne)
        });
        println!(
            "  {:<10} {nc} cvars, {np} pvars, {ne} events, {ns} subcategories: {}",
            t.name(),
            t.desc()
        );
    }
}

fn events() {
    let mut n = 0;
    // SAFETY: output argument.
    ok("MPI_T_event_get_num", unsafe {
        MPI_T_event_get_num(&mut n)
    });
    println!(
        "\nEvents ({n}): delivered to callbacks registered for MPI_T_CB_REQUIRE_MPI_RESTRICTED"
    );
    for i in 0..n {
        let mut t = Text::new();
        let mut ne = 0;
        let (mut verb, mut en, mut bind) = (0, 0, 0);
        // SAFETY: buffers of the sizes passed; NULL arrays with 0 elements of room.
        ok("MPI_T_event_get_info", unsafe {
            MPI_T_event_get_info(
                i,
                t.name.as_mut_ptr(),
                &mut t.nl,
                &mut verb,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut ne,
                &mut en,
                std::ptr::null_mut(),
                t.desc.as_mut_ptr(),
                &mut t.dl,
                &mut bind,
            )
        });
        println!("  {:<24} {ne} elements: {}", t.name(), t.desc());
    }
}

fn main() {
    // SAFETY: restoring the default disposition of SIGPIPE has no memory
    // effects; `gwtools | head` then ends quietly as C tools do.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut init = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--init" => init = true,
            "-h" | "--help" => {
                println!("usage: gwtools [--init]\n  lists gridwire's MPI_T control and performance variables, categories and events\n  --init: start MPI as a singleton first (adds the methods' counters and shows values)");
                return;
            }
            _ => {
                eprintln!("gwtools: unknown argument {a} (see --help)");
                std::process::exit(2);
            }
        }
    }
    let mut provided = 0;
    // SAFETY: output argument.
    ok("MPI_T_init_thread", unsafe {
        MPI_T_init_thread(0, &mut provided)
    });
    if init {
        // SAFETY: NULL argc/argv are allowed.
        ok("MPI_Init", unsafe {
            MPI_Init(std::ptr::null_mut(), std::ptr::null_mut())
        });
    }
    cvars();
    pvars(init);
    categories();
    events();
    // SAFETY: matched with the init above.
    ok("MPI_T_finalize", unsafe { MPI_T_finalize() });
    if init {
        // SAFETY: after MPI_Init.
        ok("MPI_Finalize", unsafe { MPI_Finalize() });
    }
}
