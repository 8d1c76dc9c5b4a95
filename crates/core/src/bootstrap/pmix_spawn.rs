//! `PMIx_Spawn`: starting new processes under a PMIx server (Open MPI's
//! `mpirun`, whose daemons start them as a job of their own, a new
//! namespace).
//!
//! PMIx has no "preput" (pairs put into the new job's key-value space
//! before it starts, as PMI-1 and PMI-2 have): each pair rides instead as
//! an environment variable of the new processes, named by the key in
//! capitals (`gw_parent_port` → `GW_PARENT_PORT`), through the
//! application's `env` array, which the server adds to their environment.
//! The info keys the standard names for `MPI_Comm_spawn` map onto the
//! application: `wdir` is its `cwd`, `host` the `PMIX_HOST` attribute;
//! others are left out (the standard lets an implementation ignore them).

use std::ffi::{c_char, c_int, CString};

use super::{abi, Info, Pmix, Value};
use crate::bootstrap::pmi_wire::Command;
use crate::bootstrap::spawn_wire::{SpawnApp, MAX_SPAWN_ITEMS};
use crate::error::Result;

/// `PMIX_HOST`: the hosts to start an application's processes on.
pub(crate) const HOST: &str = "pmix.host";

/// `pmix_app_t`.
#[repr(C)]
pub(crate) struct App {
    pub cmd: *mut c_char,
    pub argv: *mut *mut c_char,
    pub env: *mut *mut c_char,
    pub cwd: *mut c_char,
    pub maxprocs: c_int,
    pub info: *mut Info,
    pub ninfo: usize,
}

/// `PMIx_Spawn(job_info, ninfo, apps, napps, nspace)`.
pub(crate) type SpawnFn =
    unsafe extern "C" fn(*const Info, usize, *const App, usize, *mut c_char) -> c_int;

/// The environment variable a preput pair becomes: the key in capitals,
/// every byte other than a letter, digit or `_` made `_`.
pub fn preput_env_name(key: &str) -> String {
    key.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                b.to_ascii_uppercase() as char
            } else {
                '_'
            }
        })
        .collect()
}

fn cstring(s: &str, what: &str) -> std::result::Result<CString, String> {
    CString::new(s).map_err(|_| format!("the spawn's {what} {s:?} contains a NUL"))
}

/// One application's C strings, owned while the call runs.
struct OwnedApp {
    cmd: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: Option<CString>,
    host: Option<CString>,
    maxprocs: c_int,
}

fn owned(app: &SpawnApp, preput: &[(String, String)]) -> std::result::Result<OwnedApp, String> {
    if app.command.is_empty() || app.args.len() > MAX_SPAWN_ITEMS {
        return Err("a spawned program needs a name and at most 1024 arguments".into());
    }
    let maxprocs = c_int::try_from(app.maxprocs)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("maxprocs {} is out of range", app.maxprocs))?;
    let cmd = cstring(&app.command, "program")?;
    // argv[0] is the program, as PMIx servers expect.
    let argv = std::iter::once(app.command.as_str())
        .chain(app.args.iter().map(String::as_str))
        .map(|a| cstring(a, "argument"))
        .collect::<std::result::Result<_, _>>()?;
    let env = preput
        .iter()
        .map(|(k, v)| cstring(&format!("{}={v}", preput_env_name(k)), "preput pair"))
        .collect::<std::result::Result<_, _>>()?;
    let find = |key: &str| app.info.iter().rev().find(|(k, _)| k == key);
    let cwd = find("wdir").map(|(_, v)| cstring(v, "wdir")).transpose()?;
    let host = find("host").map(|(_, v)| cstring(v, "host")).transpose()?;
    Ok(OwnedApp {
        cmd,
        argv,
        env,
        cwd,
        host,
        maxprocs,
    })
}

/// NULL-terminated array of pointers into `strings` (which must outlive it).
fn pointers(strings: &[CString]) -> Vec<*mut c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// Calls `PMIx_Spawn` for `apps`; the new namespace, or the library's
/// refusal.
fn call_spawn(api: &super::Api, apps: Vec<OwnedApp>) -> std::result::Result<String, String> {
    // Everything the C structures point into lives until the end of this
    // function: `apps` (the strings) and the pointer vectors below.
    let argvs: Vec<Vec<*mut c_char>> = apps.iter().map(|a| pointers(&a.argv)).collect();
    let envs: Vec<Vec<*mut c_char>> = apps.iter().map(|a| pointers(&a.env)).collect();
    let mut infos: Vec<Vec<Info>> = apps
        .iter()
        .map(|a| {
            a.host
                .iter()
                .map(|h| {
                    Info::keyed(
                        HOST,
                        Value {
                            type_: abi::T_STRING,
                            data: abi::ValueData {
                                string: h.as_ptr().cast_mut(),
                            },
                        },
                    )
                })
                .collect()
        })
        .collect();
    let c_apps: Vec<App> = apps
        .iter()
        .zip(argvs.iter().zip(envs.iter()))
        .zip(infos.iter_mut())
        .map(|((a, (argv, env)), info)| App {
            cmd: a.cmd.as_ptr().cast_mut(),
            argv: argv.as_ptr().cast_mut(),
            env: env.as_ptr().cast_mut(),
            cwd: a
                .cwd
                .as_ref()
                .map_or(std::ptr::null_mut(), |c| c.as_ptr().cast_mut()),
            maxprocs: a.maxprocs,
            info: if info.is_empty() {
                std::ptr::null_mut()
            } else {
                info.as_mut_ptr()
            },
            ninfo: info.len(),
        })
        .collect();
    let mut nspace = [0 as c_char; abi::MAX_NSLEN + 1];
    // SAFETY: every pointer in `c_apps` points into `apps`, `argvs`,
    // `envs` or `infos`, all alive for the call; the arrays are
    // NULL-terminated as pmix_app_t requires; `nspace` has the
    // PMIX_MAX_NSLEN + 1 bytes a pmix_nspace_t has. PMIx_Spawn copies
    // what it needs before it returns (it is the blocking form).
    let rc = unsafe {
        (api.spawn)(
            std::ptr::null(),
            0,
            c_apps.as_ptr(),
            c_apps.len(),
            nspace.as_mut_ptr(),
        )
    };
    if rc != abi::SUCCESS {
        return Err(format!("PMIx_Spawn failed: {}", api.describe(rc)));
    }
    let mut p = abi::Proc::zeroed();
    p.nspace = nspace;
    super::nspace_of(&p).map_err(|e| format!("PMIx_Spawn returned {e}"))
}

impl Pmix {
    /// `PMIx_Spawn` of `apps` as a new job, `preput` passed as environment
    /// variables (see the module documentation). `Ok(Ok(reply))` once the
    /// server says the processes started (the reply carries the new
    /// namespace as `nspace`); `Ok(Err(why))` when it refused or the
    /// request cannot be expressed.
    pub fn spawn(
        &mut self,
        apps: &[SpawnApp],
        preput: &[(String, String)],
    ) -> Result<std::result::Result<Command, String>> {
        self.check_live("spawn")?;
        if apps.is_empty() || apps.len() > MAX_SPAWN_ITEMS || preput.len() > MAX_SPAWN_ITEMS {
            return Ok(Err(format!(
                "a spawn names 1 to {MAX_SPAWN_ITEMS} programs (got {})",
                apps.len()
            )));
        }
        let owned_apps = match apps
            .iter()
            .map(|a| owned(a, preput))
            .collect::<std::result::Result<Vec<_>, _>>()
        {
            Ok(a) => a,
            Err(why) => return Ok(Err(why)),
        };
        let api = self.api;
        // The C structures hold raw pointers (not Send): they are built on
        // the worker, from the owned strings moved there.
        let r = self.worker.run("PMIx_Spawn", self.timeout, move || {
            call_spawn(api, owned_apps)
        })?;
        Ok(r.map(|ns| Command::new("spawn-response").arg("nspace", ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preput_pairs_become_variables() {
        assert_eq!(preput_env_name("gw_parent_port"), "GW_PARENT_PORT");
        assert_eq!(preput_env_name("a-b.c"), "A_B_C");
    }

    #[test]
    fn apps_are_checked_and_mapped() {
        let app = SpawnApp {
            command: "/bin/prog".into(),
            args: vec!["child".into()],
            maxprocs: 2,
            info: vec![
                ("wdir".into(), "/tmp".into()),
                ("host".into(), "n1".into()),
                ("soft".into(), "1:2".into()),
            ],
        };
        let pre = [("gw_parent_port".to_string(), "gwport:x".to_string())];
        let o = owned(&app, &pre).unwrap();
        assert_eq!(o.argv.len(), 2);
        assert_eq!(o.argv[0].to_str().unwrap(), "/bin/prog");
        assert_eq!(o.env[0].to_str().unwrap(), "GW_PARENT_PORT=gwport:x");
        assert_eq!(o.cwd.unwrap().to_str().unwrap(), "/tmp");
        assert_eq!(o.host.unwrap().to_str().unwrap(), "n1");
        assert_eq!(o.maxprocs, 2);
        let p = pointers(&o.argv);
        assert_eq!(p.len(), 3);
        assert!(p[2].is_null());
        let mut bad = app.clone();
        bad.args = vec!["a\0b".into()];
        assert!(owned(&bad, &pre).is_err());
        let mut bad = app.clone();
        bad.maxprocs = u32::MAX;
        assert!(owned(&bad, &pre).is_err());
        let mut bad = app;
        bad.command.clear();
        assert!(owned(&bad, &pre).is_err());
    }
}
