//! `MPI_Comm_spawn` in gwrun: the room a job reserves for spawned
//! processes, and starting a spawned world (server side:
//! `gridwire_launch::server`'s spawn module).

use super::*;
use gridwire_core::bootstrap::spawn_wire::SpawnApp;
use gridwire_launch::server::Output;

pub use gridwire_launch::server::job_capacity as capacity;

use gridwire_launch::server::resolve_program as resolve;

/// What the launcher does with one program of a spawn, from its info keys
/// (`wdir`, `path`, `host`; others are ignored, as the standard allows).
struct AppPlan {
    program: std::path::PathBuf,
    wdir: Option<std::path::PathBuf>,
    /// The index of the `host` key's host, if given.
    host: Option<usize>,
}

fn info<'a>(app: &'a SpawnApp, key: &str) -> Option<&'a str> {
    app.info
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn plan_app(app: &SpawnApp, hosts: &[String]) -> Result<AppPlan, String> {
    let wdir = match info(app, "wdir") {
        Some(d) => {
            let p = std::path::PathBuf::from(d);
            if !p.is_dir() {
                return Err(format!("wdir '{d}' is not a directory"));
            }
            Some(p)
        }
        None => None,
    };
    let program = resolve(&app.command, wdir.as_deref(), info(app, "path")).ok_or_else(|| {
        format!(
            "cannot execute '{}': no such executable file (PATH searched)",
            app.command
        )
    })?;
    let host = match info(app, "host") {
        Some(h) => {
            match hosts.iter().position(|x| x == h) {
                Some(i) => Some(i),
                // Without emulated hosts there is one: this machine.
                None if hosts.len() <= 1 && gridwire_launch::machines::is_this_machine(h) => {
                    Some(0)
                }
                None => {
                    return Err(format!(
                        "host '{h}' is not a host of this job (hosts: {})",
                        hosts.join(", ")
                    ))
                }
            }
        }
        None => None,
    };
    Ok(AppPlan {
        program,
        wdir,
        host,
    })
}

impl Job {
    /// Hands a server's output to the ranks it addresses.
    pub(super) fn deliver(&mut self, out: Output) {
        for (to, line) in out.replies {
            if let Some(rk) = self.ranks.get_mut(to) {
                rk.pmi_out.extend_from_slice(line.as_bytes());
            }
            self.flush_pmi(to);
        }
    }

    /// Rank `parent` asked to spawn `apps`: start them as a new world of
    /// the job, or answer why not. Everything is checked before the first
    /// process starts; a program that still fails to start kills the ones
    /// of its world started before it.
    pub(super) fn spawn_world(
        &mut self,
        parent: usize,
        apps: Vec<SpawnApp>,
        preput: Vec<(String, String)>,
    ) {
        let total: usize = apps.iter().map(|a| a.maxprocs as usize).sum();
        let refuse = |job: &mut Job, why: String| {
            let out = job.server.spawn_refused(parent, &why);
            job.deliver(out);
        };
        if self.outcome.is_some() {
            return refuse(self, "the job is ending".into());
        }
        let plans: Result<Vec<AppPlan>, String> = apps
            .iter()
            .map(|a| plan_app(a, &self.spec.placement.hosts))
            .collect();
        let plans = match plans {
            Ok(p) => p,
            Err(why) => return refuse(self, why),
        };
        let first = match self.server.add_world(parent, total) {
            Ok(f) => f,
            Err(why) => return refuse(self, why),
        };
        // GW_PARENT (how the new processes reach their parents) comes from
        // the spawning library; the other pairs go into the key-value space.
        let mut env: Vec<(String, String)> = vec![("PMI_SPAWNED".into(), "1".into())];
        for (k, v) in &preput {
            if k == "gw_parent" {
                env.push(("GW_PARENT".into(), v.clone()));
            }
        }
        let nhosts = self.spec.placement.hosts.len().max(1);
        let mut r = first;
        let mut failed = None;
        'apps: for (appnum, (app, plan)) in apps.iter().zip(&plans).enumerate() {
            let mut env = env.clone();
            env.push(("GW_APPNUM".into(), appnum.to_string()));
            for _ in 0..app.maxprocs {
                self.spawned_world.push((first, total));
                // Spawned processes go round the (emulated) hosts, or to
                // the one the `host` key names.
                self.spec
                    .placement
                    .rank_host
                    .push(plan.host.unwrap_or(r % nhosts));
                let program = plan.program.to_string_lossy();
                if let Err((_, msg)) =
                    self.spawn(r, &program, &app.args, &env, plan.wdir.as_deref())
                {
                    failed = Some(msg);
                    break 'apps;
                }
                r += 1;
            }
        }
        let Some(why) = failed else {
            return;
        };
        // Ranks of this world that never started: placeholders, already exited.
        while self.ranks.len() < first + total {
            self.ranks.push(Rank::placeholder());
            self.spawned_world.push((first, total));
        }
        for rk in &mut self.ranks[first..first + total] {
            rk.abandoned = true;
            sys::kill_group(rk.pid, libc::SIGKILL);
        }
        let out = self.server.spawn_failed(first, &why);
        self.deliver(out);
    }
}
