//! `--bind-to`: pinning each rank to one CPU, as MPICH's Hydra
//! (`-bind-to core`, `-bind-to user:0,1`) and Open MPI (`--bind-to core`) do.
//!
//! Why a launcher needs it: on a small machine the scheduler's placement of
//! two busy ranks decides figures more than the software does. On our 2-vCPU
//! guest a loopback TCP ping-pong takes 2.8 µs one way with the accepting
//! process on one vCPU and 3.9 µs with it on the other, and an unpinned run
//! lands on either at random; benchmarks pin to compare like with like.
//!
//! All ranks run on this machine (emulated hosts included), so rank `r`
//! takes the `r`-th CPU of the list, cycling: `core` is the list of CPUs
//! gwrun itself may run on, `user:LIST` is given explicitly.

use std::fmt;

/// How ranks are pinned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Binding {
    /// The scheduler places the ranks (the default, as in MPICH).
    #[default]
    None,
    /// Rank `r` on the `r mod len`-th CPU of the list.
    Cpus(Vec<usize>),
}

#[derive(Debug, PartialEq, Eq)]
pub struct BadBinding(String);

impl fmt::Display for BadBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The highest CPU number `sched_setaffinity` can be given through a `cpu_set_t`.
const MAX_CPU: usize = libc::CPU_SETSIZE as usize - 1;

impl Binding {
    /// Parses `none`, `core` (also `cores`, `hwthread`: every CPU we may
    /// use counts as one) or `user:A,B,...`. `allowed` is the CPUs gwrun
    /// may use; an explicit CPU outside them is refused.
    pub fn parse(s: &str, allowed: &[usize]) -> Result<Binding, BadBinding> {
        match s {
            "none" => Ok(Binding::None),
            "core" | "cores" | "hwthread" | "hwthreads" => {
                if allowed.is_empty() {
                    return Err(BadBinding(
                        "--bind-to core: cannot read the CPUs gwrun may use".into(),
                    ));
                }
                Ok(Binding::Cpus(allowed.to_vec()))
            }
            _ => {
                let Some(list) = s.strip_prefix("user:") else {
                    return Err(BadBinding(format!(
                        "bad --bind-to {s:?}: expected none, core or user:CPU,CPU,..."
                    )));
                };
                let mut cpus = Vec::new();
                for item in list.split(',') {
                    let cpu: usize = item.trim().parse().map_err(|_| {
                        BadBinding(format!(
                            "bad CPU {item:?} in --bind-to {s:?}: expected a CPU number"
                        ))
                    })?;
                    if cpu > MAX_CPU || !allowed.contains(&cpu) {
                        return Err(BadBinding(format!(
                            "CPU {cpu} in --bind-to {s:?} is not one gwrun may use (allowed: {})",
                            list_text(allowed)
                        )));
                    }
                    cpus.push(cpu);
                }
                Ok(Binding::Cpus(cpus))
            }
        }
    }

    /// The CPU of rank `r`, if ranks are pinned.
    pub fn cpu_of(&self, r: usize) -> Option<usize> {
        match self {
            Binding::None => None,
            Binding::Cpus(c) => Some(c[r % c.len()]),
        }
    }
}

fn list_text(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set), and
    // sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..=MAX_CPU)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling process to `cpu`. Async-signal-safe (one system call
/// on a stack value), so it may run between fork and exec.
pub fn pin_self(cpu: usize) -> std::io::Result<()> {
    // SAFETY: as in allowed_cpus; `cpu` <= MAX_CPU (checked by `parse`, or
    // taken from the set sched_getaffinity returned), so CPU_SET stays in
    // bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_hydra_spellings() {
        let allowed = [0, 1, 2, 3];
        assert_eq!(Binding::parse("none", &allowed), Ok(Binding::None));
        assert_eq!(
            Binding::parse("core", &allowed),
            Ok(Binding::Cpus(vec![0, 1, 2, 3]))
        );
        assert_eq!(
            Binding::parse("user:1,0", &allowed),
            Ok(Binding::Cpus(vec![1, 0]))
        );
        let b = Binding::parse("user:3,1", &allowed).unwrap();
        assert_eq!(
            (b.cpu_of(0), b.cpu_of(1), b.cpu_of(2)),
            (Some(3), Some(1), Some(3))
        );
        assert_eq!(Binding::None.cpu_of(0), None);
    }

    #[test]
    fn refuses_bad_lists_with_a_reason() {
        let allowed = [0, 1];
        for bad in [
            "socket",
            "user:",
            "user:0,x",
            "user:2",
            "user:-1",
            "user:99999",
        ] {
            let e = Binding::parse(bad, &allowed).unwrap_err().to_string();
            assert!(e.contains("--bind-to"), "{bad}: {e}");
        }
        assert!(Binding::parse("core", &[]).is_err());
    }

    #[test]
    fn this_process_has_cpus_and_can_pin_in_a_child() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        // Pin a forked child only: the test harness's own threads keep their CPUs.
        // SAFETY: the child makes only async-signal-safe calls (sched_*, _exit).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // No allocation here (another test thread may hold the allocator's lock).
            let ok = pin_self(last).is_ok() && {
                // SAFETY: as in allowed_cpus.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
                        == 0
                        && libc::CPU_COUNT(&set) == 1
                        && libc::CPU_ISSET(last, &set)
                }
            };
            // SAFETY: leaving the forked child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
