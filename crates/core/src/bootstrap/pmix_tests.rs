//! Tests of the PMIx client: the pieces that check what the library
//! returns, the layout of the declarations against the installed header,
//! and whole sessions against a fake libpmix built here in C whose answers
//! are hostile on demand.

use super::*;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn environment_markers() {
    assert!(!offered_by(env(&[])));
    assert!(offered_by(env(&[("PMIX_NAMESPACE", "1903165441")])));
    assert!(offered_by(env(&[(
        "PMIX_SERVER_URI41",
        "1.0;tcp4://127.0.0.1:1"
    )])));
    assert!(!offered_by(env(&[("PMIX_NAMESPACE", " ")])));
    assert!(!offered_by(env(&[("PMIX_RANK", "0")])));
}

#[test]
fn keys_and_abort_messages_are_checked() {
    assert!(check_key("gw.desc.3").is_ok());
    assert!(check_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
    for bad in ["", "a\nb", "pmix.job.size", "pmix"] {
        assert!(check_key(bad).is_err(), "{bad:?}");
    }
    assert!(check_key(&"k".repeat(MAX_KEY_LEN + 1))
        .unwrap_err()
        .to_string()
        .contains("at most 511"));
    assert_eq!(abort_text("bad\n\tnews"), "bad  news");
    let long = abort_text(&"é".repeat(1000));
    assert!(long.len() <= MAX_ABORT_MSG && long.chars().all(|c| c == 'é'));
}

#[test]
fn library_strings_are_bounded() {
    let ok = CString::new("hello").unwrap();
    // SAFETY: a valid C string.
    assert_eq!(
        unsafe { bounded_str(ok.as_ptr(), 5) }.unwrap().as_deref(),
        Some("hello")
    );
    // SAFETY: readable up to its NUL, which lies beyond the bound.
    let e = unsafe { bounded_str(ok.as_ptr(), 4) }.unwrap_err();
    assert!(e.contains("longer than 4"), "{e}");
    // SAFETY: null is allowed.
    assert_eq!(unsafe { bounded_str(std::ptr::null(), 4) }.unwrap(), None);
    let bad = [0xffu8 as c_char, 0];
    // SAFETY: NUL-terminated array.
    assert!(unsafe { bounded_str(bad.as_ptr(), 4) }.is_err());
}

#[test]
fn namespaces_from_the_library_are_checked() {
    let mut p = proc_of("1903165441", 0);
    assert_eq!(nspace_of(&p).unwrap(), "1903165441");
    p.nspace = [b'x' as c_char; abi::MAX_NSLEN + 1];
    assert!(nspace_of(&p).unwrap_err().contains("without a NUL"));
    let p = proc_of("", 0);
    assert!(nspace_of(&p).unwrap_err().contains("empty"));
    let p = proc_of("a b", 0);
    assert!(nspace_of(&p).unwrap_err().contains("printable"));
    // An over-long name is cut so that a NUL always ends it.
    let p = proc_of(&"n".repeat(400), 0);
    assert_eq!(nspace_of(&p).unwrap().len(), abi::MAX_NSLEN);
}

#[test]
fn values_are_read_by_their_type() {
    let num = |type_, data| Value { type_, data };
    let v = num(abi::T_UINT32, abi::ValueData { uint32: 4 });
    assert_eq!(u32_value(&v).unwrap(), 4);
    let v = num(abi::T_INT, abi::ValueData { integer: -1 });
    assert!(u32_value(&v).unwrap_err().contains("out of range"));
    let v = num(abi::T_UINT64, abi::ValueData { uint64: 1 << 40 });
    assert!(u32_value(&v).is_err());
    let v = num(abi::T_SIZE, abi::ValueData { size: 7 });
    assert_eq!(u32_value(&v).unwrap(), 7);
    let v = num(abi::T_BOOL, abi::ValueData { flag: true });
    assert!(u32_value(&v).unwrap_err().contains("type 1"));
    assert!(string_value(&v).unwrap_err().contains("type 1"));
    let s = CString::new("v=1").unwrap();
    let v = num(
        abi::T_STRING,
        abi::ValueData {
            string: s.as_ptr().cast_mut(),
        },
    );
    assert_eq!(string_value(&v).unwrap(), "v=1");
    let v = num(
        abi::T_STRING,
        abi::ValueData {
            string: std::ptr::null_mut(),
        },
    );
    assert!(string_value(&v).unwrap_err().contains("null"));
    let long = CString::new("x".repeat(MAX_VALUE_LEN + 1)).unwrap();
    let v = num(
        abi::T_STRING,
        abi::ValueData {
            string: long.as_ptr().cast_mut(),
        },
    );
    assert!(string_value(&v).unwrap_err().contains("longer than"));
}

#[test]
fn missing_library_names_every_candidate() {
    let e = load_from(&["/nonexistent/libpmix.so.2", "libpmix-not-here.so.9"])
        .err()
        .expect("nothing to load");
    assert!(
        e.contains("/nonexistent/libpmix.so.2") && e.contains("libpmix-not-here.so.9"),
        "{e}"
    );
    // A library without the PMIx entry points is refused too.
    let e = load_from(&["libc.so.6"]).err().expect("libc is no libpmix");
    assert!(e.contains("no PMIx_Init"), "{e}");
}

#[test]
fn worker_bounds_a_call_that_never_returns() {
    let mut w = Worker::start().unwrap();
    assert_eq!(w.run("quick", Duration::from_secs(5), || 7).unwrap(), 7);
    let t = std::time::Instant::now();
    let e = w
        .run("PMIx_Init", Duration::from_millis(200), || {
            std::thread::sleep(Duration::from_secs(3))
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no answer from the PMIx server to PMIx_Init"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    let e = w.run("PMIx_Get", Duration::from_secs(5), || 1).unwrap_err();
    assert!(e.to_string().contains("earlier PMIx_Init"), "{e}");
}

/// Compiles `src` against the installed PMIx headers with `cc ARGS` into
/// a fresh directory; `None` (after the skip, a failure under CI) when the
/// headers or the compiler are missing. Returns the directory (the caller
/// removes it) and the output file.
fn build_c(
    tag: &str,
    src: &str,
    args: &[&str],
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let incdir = ["/usr/lib/x86_64-linux-gnu/pmix2/include", "/usr/include"]
        .into_iter()
        .find(|d| std::path::Path::new(d).join("pmix_common.h").exists());
    let Some(incdir) = incdir else {
        gridwire_testkit::skip("pmix_common.h is not installed (Debian package libpmix-dev)");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("gw-pmix-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join(format!("{tag}.c"));
    let out = dir.join(tag);
    std::fs::write(&c, src).unwrap();
    let cc = match std::process::Command::new("cc")
        .arg(format!("-I{incdir}"))
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            gridwire_testkit::skip(&format!("no C compiler (cc): {e}"));
            return None;
        }
    };
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    Some((dir, out))
}

/// The declarations above against the installed `pmix_common.h`: a C
/// file prints each size, offset and constant, compared one by one.
#[test]
fn layout_matches_the_installed_header() {
    let Some((dir, exe)) = build_c("layout", LAYOUT_C, &[]) else {
        return;
    };
    let out = std::process::Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let c: std::collections::HashMap<&str, i128> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.parse().ok()?))
        })
        .collect();
    let ours: &[(&str, i128)] = &[
        ("sizeof_proc", std::mem::size_of::<Proc>() as i128),
        (
            "offsetof_proc_rank",
            std::mem::offset_of!(Proc, rank) as i128,
        ),
        ("sizeof_value", std::mem::size_of::<Value>() as i128),
        (
            "offsetof_value_data",
            std::mem::offset_of!(Value, data) as i128,
        ),
        ("alignof_value", std::mem::align_of::<Value>() as i128),
        ("sizeof_info", std::mem::size_of::<Info>() as i128),
        (
            "offsetof_info_flags",
            std::mem::offset_of!(Info, flags) as i128,
        ),
        (
            "offsetof_info_value",
            std::mem::offset_of!(Info, value) as i128,
        ),
        (
            "sizeof_app",
            std::mem::size_of::<super::spawn::App>() as i128,
        ),
        (
            "offsetof_app_maxprocs",
            std::mem::offset_of!(super::spawn::App, maxprocs) as i128,
        ),
        (
            "offsetof_app_info",
            std::mem::offset_of!(super::spawn::App, info) as i128,
        ),
        (
            "offsetof_app_ninfo",
            std::mem::offset_of!(super::spawn::App, ninfo) as i128,
        ),
        ("sizeof_scope", 1),
        ("sizeof_data_type", 2),
        ("sizeof_rank", 4),
        ("sizeof_status", std::mem::size_of::<c_int>() as i128),
        ("MAX_NSLEN", abi::MAX_NSLEN as i128),
        ("MAX_KEYLEN", abi::MAX_KEYLEN as i128),
        ("RANK_UNDEF", abi::RANK_UNDEF.into()),
        ("RANK_WILDCARD", abi::RANK_WILDCARD.into()),
        ("RANK_INVALID", abi::RANK_INVALID.into()),
        ("SUCCESS", abi::SUCCESS.into()),
        ("ERR_TIMEOUT", abi::ERR_TIMEOUT.into()),
        ("ERR_UNREACH", abi::ERR_UNREACH.into()),
        ("ERR_NOT_FOUND", abi::ERR_NOT_FOUND.into()),
        ("GLOBAL", abi::GLOBAL.into()),
        ("BOOL", abi::T_BOOL.into()),
        ("STRING", abi::T_STRING.into()),
        ("SIZE", abi::T_SIZE.into()),
        ("INT", abi::T_INT.into()),
        ("INT8", abi::T_INT8.into()),
        ("INT16", abi::T_INT16.into()),
        ("INT32", abi::T_INT32.into()),
        ("INT64", abi::T_INT64.into()),
        ("UINT", abi::T_UINT.into()),
        ("UINT8", abi::T_UINT8.into()),
        ("UINT16", abi::T_UINT16.into()),
        ("UINT32", abi::T_UINT32.into()),
        ("UINT64", abi::T_UINT64.into()),
    ];
    for (name, want) in ours {
        assert_eq!(c.get(name), Some(want), "{name}: C says {:?}", c.get(name));
    }
    // The attribute names, compared as text.
    for (name, ours) in [
        ("KEY_JOB_SIZE", abi::JOB_SIZE),
        ("KEY_APPNUM", abi::APPNUM),
        ("KEY_UNIV_SIZE", abi::UNIV_SIZE),
        ("KEY_COLLECT_DATA", abi::COLLECT_DATA),
        ("KEY_OPTIONAL", abi::OPTIONAL),
        ("KEY_TIMEOUT", abi::TIMEOUT),
        ("KEY_HOST", super::spawn::HOST),
    ] {
        assert!(
            text.lines().any(|l| l == format!("{name} {ours}")),
            "{name} is not {ours:?}:\n{text}"
        );
    }
}

const LAYOUT_C: &str = r#"#include <stddef.h>
#include <stdio.h>
#include <pmix_common.h>
#define N(name, v) printf("%s %lld\n", name, (long long)(v))
#define K(name, v) printf("%s %s\n", name, v)
int main(void) {
N("sizeof_proc", sizeof(pmix_proc_t));
N("offsetof_proc_rank", offsetof(pmix_proc_t, rank));
N("sizeof_value", sizeof(pmix_value_t));
N("offsetof_value_data", offsetof(pmix_value_t, data));
N("alignof_value", _Alignof(pmix_value_t));
N("sizeof_info", sizeof(pmix_info_t));
N("offsetof_info_flags", offsetof(pmix_info_t, flags));
N("offsetof_info_value", offsetof(pmix_info_t, value));
N("sizeof_app", sizeof(pmix_app_t));
N("offsetof_app_maxprocs", offsetof(pmix_app_t, maxprocs));
N("offsetof_app_info", offsetof(pmix_app_t, info));
N("offsetof_app_ninfo", offsetof(pmix_app_t, ninfo));
N("sizeof_scope", sizeof(pmix_scope_t));
N("sizeof_data_type", sizeof(pmix_data_type_t));
N("sizeof_rank", sizeof(pmix_rank_t));
N("sizeof_status", sizeof(pmix_status_t));
N("MAX_NSLEN", PMIX_MAX_NSLEN);
N("MAX_KEYLEN", PMIX_MAX_KEYLEN);
N("RANK_UNDEF", PMIX_RANK_UNDEF);
N("RANK_WILDCARD", PMIX_RANK_WILDCARD);
N("RANK_INVALID", PMIX_RANK_INVALID);
N("SUCCESS", PMIX_SUCCESS);
N("ERR_TIMEOUT", PMIX_ERR_TIMEOUT);
N("ERR_UNREACH", PMIX_ERR_UNREACH);
N("ERR_NOT_FOUND", PMIX_ERR_NOT_FOUND);
N("GLOBAL", PMIX_GLOBAL);
N("BOOL", PMIX_BOOL);
N("STRING", PMIX_STRING);
N("SIZE", PMIX_SIZE);
N("INT", PMIX_INT);
N("INT8", PMIX_INT8);
N("INT16", PMIX_INT16);
N("INT32", PMIX_INT32);
N("INT64", PMIX_INT64);
N("UINT", PMIX_UINT);
N("UINT8", PMIX_UINT8);
N("UINT16", PMIX_UINT16);
N("UINT32", PMIX_UINT32);
N("UINT64", PMIX_UINT64);
K("KEY_JOB_SIZE", PMIX_JOB_SIZE);
K("KEY_APPNUM", PMIX_APPNUM);
K("KEY_UNIV_SIZE", PMIX_UNIV_SIZE);
K("KEY_COLLECT_DATA", PMIX_COLLECT_DATA);
K("KEY_OPTIONAL", PMIX_OPTIONAL);
K("KEY_TIMEOUT", PMIX_TIMEOUT);
K("KEY_HOST", PMIX_HOST);
return 0;
}
"#;

/// A stand-in for libpmix with the same entry points (its signatures are
/// checked by compiling against the real `pmix.h`), whose answers are
/// right or hostile by mode, and which logs every call it gets.
const FAKE_C: &str = r#"#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pmix.h>

enum { NORMAL, INIT_FAIL, INIT_HANG, NSPACE_NO_NUL, RANK_WILD, SIZE_STRING, SIZE_SMALL,
       APPNUM_NEG, LONG_VALUE, NULL_VALUE, WRONG_TYPE, FENCE_TIMEOUT };
static int mode;
static char logbuf[16384];
static int allocs, destructs;
static char keys[8][600], vals[8][2048];
static int nstored;

void fake_set_mode(int m) { mode = m; logbuf[0] = 0; nstored = 0; allocs = destructs = 0; }
const char *fake_log(void) { return logbuf; }
int fake_unreleased(void) { return allocs - destructs; }

static void say(const char *fmt, ...) {
    size_t n = strlen(logbuf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logbuf + n, sizeof logbuf - n, fmt, ap);
    va_end(ap);
}
static const char *rank_name(pmix_rank_t r) {
    static char b[16];
    if (r == PMIX_RANK_WILDCARD) return "wild";
    if (r == PMIX_RANK_UNDEF) return "undef";
    snprintf(b, sizeof b, "%u", r);
    return b;
}
static pmix_value_t *newval(pmix_data_type_t t) {
    pmix_value_t *v = calloc(1, sizeof *v);
    v->type = t;
    allocs++;
    return v;
}

pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo) {
    (void)info; (void)ninfo;
    say("init;");
    if (mode == INIT_FAIL) return PMIX_ERR_UNREACH;
    if (mode == INIT_HANG) for (;;) sleep(1000);
    memset(proc, 0, sizeof *proc);
    if (mode == NSPACE_NO_NUL) memset(proc->nspace, 'x', sizeof proc->nspace);
    else strcpy(proc->nspace, "fake.ns");
    proc->rank = mode == RANK_WILD ? PMIX_RANK_WILDCARD : 1;
    return PMIX_SUCCESS;
}
pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo) {
    (void)info; (void)ninfo;
    say("finalize;");
    return PMIX_SUCCESS;
}
pmix_status_t PMIx_Abort(int status, const char msg[], pmix_proc_t procs[], size_t nprocs) {
    say("abort %d [%s] %s %zu;", status, msg ? msg : "(null)", procs ? "procs" : "null", nprocs);
    return PMIX_SUCCESS;
}
pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t *val) {
    say("put %d %s=%s;", scope, key, val->type == PMIX_STRING ? val->data.string : "?");
    if (nstored < 8 && val->type == PMIX_STRING) {
        snprintf(keys[nstored], sizeof keys[0], "%s", key);
        snprintf(vals[nstored], sizeof vals[0], "%s", val->data.string);
        nstored++;
    }
    return PMIX_SUCCESS;
}
pmix_status_t PMIx_Commit(void) { say("commit;"); return PMIX_SUCCESS; }
pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs,
                         const pmix_info_t info[], size_t ninfo) {
    say("fence");
    for (size_t i = 0; i < nprocs; i++) say(" %s:%s", procs[i].nspace, rank_name(procs[i].rank));
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_COLLECT_DATA) && info[i].value.type == PMIX_BOOL)
            say(" collect=%d", info[i].value.data.flag);
        else if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT) && info[i].value.type == PMIX_INT)
            say(" timeout=%d", info[i].value.data.integer);
        else say(" other");
    }
    say(";");
    return mode == FENCE_TIMEOUT ? PMIX_ERR_TIMEOUT : PMIX_SUCCESS;
}
pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[],
                       const pmix_info_t info[], size_t ninfo, pmix_value_t **val) {
    int optional = 0;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_OPTIONAL) && info[i].value.type == PMIX_BOOL)
            optional = info[i].value.data.flag;
    say("get %s@%s%s;", key, rank_name(proc->rank), optional ? " opt" : "");
    pmix_value_t *v;
    if (strcmp(key, PMIX_JOB_SIZE) == 0) {
        if (mode == SIZE_STRING) {
            v = newval(PMIX_STRING);
            v->data.string = strdup("4");
        } else {
            v = newval(PMIX_UINT32);
            v->data.uint32 = mode == SIZE_SMALL ? 1 : 4;
        }
        *val = v;
        return PMIX_SUCCESS;
    }
    if (strcmp(key, PMIX_APPNUM) == 0) {
        v = newval(mode == APPNUM_NEG ? PMIX_INT32 : PMIX_UINT32);
        if (mode == APPNUM_NEG) v->data.int32 = -5; else v->data.uint32 = 2;
        *val = v;
        return PMIX_SUCCESS;
    }
    if (strcmp(key, PMIX_UNIV_SIZE) == 0) {
        v = newval(PMIX_UINT32);
        v->data.uint32 = 8;
        *val = v;
        return PMIX_SUCCESS;
    }
    if (mode == NULL_VALUE) { *val = NULL; return PMIX_SUCCESS; }
    if (mode == LONG_VALUE) {
        v = newval(PMIX_STRING);
        v->data.string = malloc(70001);
        memset(v->data.string, 'y', 70000);
        v->data.string[70000] = 0;
        *val = v;
        return PMIX_SUCCESS;
    }
    if (mode == WRONG_TYPE) {
        v = newval(PMIX_UINT32);
        v->data.uint32 = 7;
        *val = v;
        return PMIX_SUCCESS;
    }
    if (proc->rank == 1)
        for (int i = nstored - 1; i >= 0; i--)
            if (strcmp(keys[i], key) == 0) {
                v = newval(PMIX_STRING);
                v->data.string = strdup(vals[i]);
                *val = v;
                return PMIX_SUCCESS;
            }
    if (proc->rank == 0 && strcmp(key, "gw.from0") == 0) {
        v = newval(PMIX_STRING);
        v->data.string = strdup("zero");
        *val = v;
        return PMIX_SUCCESS;
    }
    return PMIX_ERR_NOT_FOUND;
}
void PMIx_Value_destruct(pmix_value_t *v) {
    if (v->type == PMIX_STRING) free(v->data.string);
    v->type = PMIX_UNDEF;
    destructs++;
}
const char *PMIx_Error_string(pmix_status_t s) {
    switch (s) {
    case PMIX_ERR_UNREACH: return "UNREACHABLE";
    case PMIX_ERR_TIMEOUT: return "TIMEOUT";
    case PMIX_ERR_NOT_FOUND: return "NOT-FOUND";
    default: return "ERROR";
    }
}
const char *PMIx_Get_version(void) { return "FakePMIx 0.1"; }
pmix_status_t PMIx_Spawn(const pmix_info_t job_info[], size_t ninfo,
                         const pmix_app_t apps[], size_t napps, pmix_nspace_t nspace) {
    (void)job_info; (void)ninfo;
    for (size_t a = 0; a < napps; a++) {
        say("spawn %s [", apps[a].cmd);
        for (char **v = apps[a].argv; v && *v; v++) say("%s%s", v == apps[a].argv ? "" : " ", *v);
        say("] env");
        for (char **v = apps[a].env; v && *v; v++) say(" %s", *v);
        say(" cwd %s max %d", apps[a].cwd ? apps[a].cwd : "-", apps[a].maxprocs);
        for (size_t i = 0; i < apps[a].ninfo; i++)
            if (PMIX_CHECK_KEY(&apps[a].info[i], PMIX_HOST) && apps[a].info[i].value.type == PMIX_STRING)
                say(" host %s", apps[a].info[i].value.data.string);
        say(";");
    }
    snprintf(nspace, PMIX_MAX_NSLEN + 1, "fake.child");
    return PMIX_SUCCESS;
}
"#;

// The fake's modes (the enum in FAKE_C).
const NORMAL: c_int = 0;
const INIT_FAIL: c_int = 1;
const INIT_HANG: c_int = 2;
const NSPACE_NO_NUL: c_int = 3;
const RANK_WILD: c_int = 4;
const SIZE_STRING: c_int = 5;
const SIZE_SMALL: c_int = 6;
const APPNUM_NEG: c_int = 7;
const LONG_VALUE: c_int = 8;
const NULL_VALUE: c_int = 9;
const WRONG_TYPE: c_int = 10;
const FENCE_TIMEOUT: c_int = 11;

struct Fake {
    api: &'static Api,
    set_mode: unsafe extern "C" fn(c_int),
    log: unsafe extern "C" fn() -> *const c_char,
    unreleased: unsafe extern "C" fn() -> c_int,
}

impl Fake {
    fn mode(&self, m: c_int) {
        // SAFETY: the fake's own setter.
        unsafe { (self.set_mode)(m) }
    }

    fn log(&self) -> String {
        // SAFETY: the fake's log is a NUL-terminated static buffer.
        unsafe { CStr::from_ptr((self.log)()) }
            .to_string_lossy()
            .into_owned()
    }

    fn unreleased(&self) -> c_int {
        // SAFETY: the fake's counter.
        unsafe { (self.unreleased)() }
    }

    fn start(&self, want_rank: Option<u32>) -> Result<Pmix> {
        Pmix::start(
            self.api,
            Duration::from_secs(5),
            want_rank,
            "PMIX_SERVER_URI41=fake",
        )
    }
}

/// Whole client sessions against the fake library: the calls made, in
/// order and with their arguments, and a clear error for each hostile
/// answer. One test, because the fake's mode is global to the process.
#[test]
fn sessions_against_a_fake_library() {
    let Some((dir, so)) = build_c("fake", FAKE_C, &["-shared", "-fPIC"]) else {
        return;
    };
    let path: &'static str = Box::leak(so.to_string_lossy().into_owned().into_boxed_str());
    let api: &'static Api = Box::leak(Box::new(load_from(&[path]).expect("the fake loads")));
    // The fake stays loaded (load_from never unloads); its own symbols
    // are resolved from the same handle.
    // SAFETY: the library just loaded above; these are its own functions.
    let fake = unsafe {
        let lib = libloading::os::unix::Library::open(Some(path), libloading::os::unix::RTLD_NOW)
            .unwrap();
        let f = Fake {
            api,
            set_mode: *lib.get(b"fake_set_mode\0").unwrap(),
            log: *lib.get(b"fake_log\0").unwrap(),
            unreleased: *lib.get(b"fake_unreleased\0").unwrap(),
        };
        std::mem::forget(lib);
        f
    };
    let _ = std::fs::remove_dir_all(&dir);
    let err = |r: Result<Pmix>| -> String {
        match r {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => e.to_string(),
        }
    };

    // A whole session.
    fake.mode(NORMAL);
    let mut p = fake.start(Some(1)).unwrap();
    assert_eq!((p.rank(), p.size(), p.appnum()), (1, 4, 2));
    assert_eq!(p.universe_size(), Some(8));
    assert_eq!(p.kvsname(), "fake.ns");
    p.put("gw.a", "v=1").unwrap();
    assert!(p.put("pmix.job.size", "9").is_err());
    assert!(p.put("gw.nul", "a\0b").is_err());
    assert!(p.put("gw.big", &"v".repeat(MAX_VALUE_LEN + 1)).is_err());
    p.commit().unwrap();
    p.commit().unwrap(); // nothing new: no second PMIx_Commit
    p.put("gw.b", "2").unwrap();
    p.barrier().unwrap(); // commits gw.b first
    assert_eq!(p.get_from(1, "gw.a").unwrap().as_deref(), Some("v=1"));
    assert_eq!(p.get_from(0, "gw.from0").unwrap().as_deref(), Some("zero"));
    assert_eq!(p.get("gw.from0").unwrap().as_deref(), Some("zero"));
    assert_eq!(p.get("gw.none").unwrap(), None);
    // PMIx_Spawn: argv[0] is the program, the preput pair an environment
    // variable, wdir the cwd, host the PMIX_HOST attribute.
    let apps = [crate::bootstrap::spawn_wire::SpawnApp {
        command: "/bin/kid".into(),
        args: vec!["child".into()],
        maxprocs: 3,
        info: vec![("wdir".into(), "/tmp".into()), ("host".into(), "h1".into())],
    }];
    let pre = [("gw_parent_port".to_string(), "port:1".to_string())];
    let r = p.spawn(&apps, &pre).unwrap().unwrap();
    assert_eq!(r.get("nspace"), Some("fake.child"));
    assert!(p
        .get_from(4, "gw.a")
        .unwrap_err()
        .to_string()
        .contains("has 4 ranks"));
    p.finalize().unwrap();
    p.finalize().unwrap();
    assert!(p.put("gw.c", "1").is_err());
    assert!(p.barrier().is_err());
    p.abort(3, "bad\nnews").unwrap();
    assert_eq!(
        fake.log(),
        "init;get pmix.job.size@wild;get pmix.appnum@1 opt;get pmix.univ.size@wild opt;\
         put 3 gw.a=v=1;commit;put 3 gw.b=2;commit;\
         fence fake.ns:wild collect=1 timeout=5;\
         get gw.a@1 opt;get gw.from0@0 opt;get gw.from0@1 opt;get gw.from0@0 opt;\
         get gw.none@1 opt;get gw.none@0 opt;get gw.none@2 opt;get gw.none@3 opt;\
         spawn /bin/kid [/bin/kid child] env GW_PARENT_PORT=port:1 cwd /tmp max 3 host h1;\
         finalize;abort 3 [bad news] null 0;"
    );
    assert_eq!(fake.unreleased(), 0, "values not released");

    // Start-up failures and hostile start-up answers.
    let cases = [
        (
            INIT_FAIL,
            Some(1),
            "PMIx_Init failed: UNREACHABLE (-25): no PMIx server answers",
        ),
        (
            NSPACE_NO_NUL,
            None,
            "PMIx_Init returned a namespace without a NUL",
        ),
        (RANK_WILD, None, "special rank"),
        (NORMAL, Some(0), "PMIx_Init gave rank 1 but PMIX_RANK=0"),
        (
            SIZE_STRING,
            None,
            "PMIx_Get of pmix.job.size gave a value of type 3",
        ),
        (SIZE_SMALL, None, "inconsistent rank 1 and job size 1"),
    ];
    for (mode, want_rank, want) in cases {
        fake.mode(mode);
        let e = err(fake.start(want_rank));
        assert!(e.contains(want), "mode {mode}: want {want:?}, got {e:?}");
        assert_eq!(fake.unreleased(), 0, "mode {mode}: values not released");
    }
    fake.mode(INIT_FAIL);
    let e = err(fake.start(None));
    assert!(
        e.contains("FakePMIx 0.1") && e.contains("PMIX_SERVER_URI41=fake"),
        "{e}"
    );

    // An unusable application number is "not said".
    fake.mode(APPNUM_NEG);
    assert_eq!(fake.start(None).unwrap().appnum(), 0);

    // Hostile answers to get and fence.
    for (mode, want) in [
        (LONG_VALUE, "longer than 65535 bytes"),
        (NULL_VALUE, "success without a value"),
        (WRONG_TYPE, "a value of type 14 where a string was put"),
    ] {
        fake.mode(mode);
        let mut p = fake.start(None).unwrap();
        let e = p.get_from(0, "gw.a").unwrap_err().to_string();
        assert!(e.contains(want), "mode {mode}: want {want:?}, got {e:?}");
        assert_eq!(fake.unreleased(), 0, "mode {mode}: values not released");
    }
    fake.mode(FENCE_TIMEOUT);
    let mut p = fake.start(None).unwrap();
    let e = p.barrier().unwrap_err().to_string();
    assert!(
        e.contains("TIMEOUT (-24)") && e.contains("did not reach the barrier"),
        "{e}"
    );

    // A library that never returns from PMIx_Init: bounded by the timeout
    // (the worker stays stuck in the fake; last, since it never comes back).
    fake.mode(INIT_HANG);
    let t = std::time::Instant::now();
    let e = err(Pmix::start(api, Duration::from_millis(300), None, ""));
    assert!(
        e.contains("no answer from the PMIx server to PMIx_Init within 0.3 s"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
}
