//! A PMI-1 test program for `gwrun` and for `mpiexec.mpich`.
//!
//! Without options: every rank puts `check.<rank>`, passes a barrier, reads
//! every other rank's key, checks it, prints one line and finalizes.
//! Options add behaviours the launcher tests need:
//!
//! * `--env`                  print GW_HOST_ID / GW_JOB_ID / secret length
//! * `--shm`                  create `/dev/shm/gw-<GW_JOB_ID>-fake-<rank>`
//! * `--child`                start a `sleep 300` child and print its pid
//! * `--pid`                  print this process's pid
//! * `--kill R SIG`           rank R kills itself with SIG after the barrier
//! * `--exit R CODE`          rank R exits with CODE after the barrier (no finalize)
//! * `--nofinalize R`         rank R exits 0 after the barrier without finalize
//! * `--abort R CODE`         rank R calls PMI abort after the barrier
//! * `--abort-then-kill R V` rank R calls PMI abort blaming a broken link to
//!   rank V, then SIGKILLs rank V: the race in which a killed rank's peer
//!   reports first, made deterministic
//! * `--sleep SECS`           every rank (other than the failing one) sleeps after the barrier
//! * `--stats`                put a `gw.stats.<rank>` record like the runtime does
//! * `--lines N`              print N long lines to stdout (interleaving test)

use std::io::Write;
use std::process::exit;

use gridwire_core::bootstrap::Pmi;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let num = |i: usize| -> i64 {
        args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            eprintln!("pmi_check: bad args");
            exit(2)
        })
    };
    let (mut env, mut shm, mut child, mut pid, mut stats) = (false, false, false, false, false);
    let (mut kill, mut exitc, mut nofin, mut abort) = (None, None, None, None);
    let mut abort_then_kill = None;
    let (mut sleep, mut lines) = (0.0f64, 0i64);
    while i < args.len() {
        match args[i].as_str() {
            "--env" => env = true,
            "--shm" => shm = true,
            "--child" => child = true,
            "--pid" => pid = true,
            "--stats" => stats = true,
            "--kill" => {
                kill = Some((num(i + 1), num(i + 2)));
                i += 2
            }
            "--exit" => {
                exitc = Some((num(i + 1), num(i + 2)));
                i += 2
            }
            "--abort" => {
                abort = Some((num(i + 1), num(i + 2)));
                i += 2
            }
            "--abort-then-kill" => {
                abort_then_kill = Some((num(i + 1), num(i + 2)));
                i += 2
            }
            "--nofinalize" => {
                nofin = Some(num(i + 1));
                i += 1
            }
            "--sleep" => {
                sleep = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
                i += 1
            }
            "--lines" => {
                lines = num(i + 1);
                i += 1
            }
            other => {
                eprintln!("pmi_check: unknown option {other}");
                exit(2)
            }
        }
        i += 1;
    }

    let mut pmi = match Pmi::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pmi_check: {e}");
            exit(3)
        }
    };
    let (rank, size) = (pmi.rank(), pmi.size());
    let r = rank as i64;
    let fail = |what: &str, e: gridwire_core::Error| -> ! {
        eprintln!("pmi_check rank {rank}: {what}: {e}");
        exit(4)
    };

    if pid {
        println!("rank {rank} pid {}", std::process::id());
    }
    if env {
        println!(
            "rank {rank} host {} job {} secret_len {}",
            std::env::var("GW_HOST_ID").unwrap_or_else(|_| "-".into()),
            std::env::var("GW_JOB_ID").unwrap_or_else(|_| "-".into()),
            std::env::var("GW_JOB_SECRET").map(|s| s.len()).unwrap_or(0)
        );
    }
    if shm {
        let job = std::env::var("GW_JOB_ID").unwrap_or_else(|_| "nojob".into());
        let path = format!("/dev/shm/gw-{job}-fake-{rank}");
        if let Err(e) = std::fs::write(&path, b"x") {
            eprintln!("pmi_check: {path}: {e}");
            exit(5)
        }
        println!("rank {rank} shm {path}");
    }
    if child {
        match std::process::Command::new("sleep").arg("300").spawn() {
            Ok(c) => println!("rank {rank} child {}", c.id()),
            Err(e) => {
                eprintln!("pmi_check: sleep: {e}");
                exit(5)
            }
        }
    }
    let _ = std::io::stdout().flush();

    let val = format!("value-of-{rank}=ok");
    pmi.put(&format!("check.{rank}"), &val)
        .unwrap_or_else(|e| fail("put", e));
    if stats {
        let links: Vec<String> = (0..size).filter(|&p| p != rank).map(|p| {
            format!("{{\"peer\":{p},\"method\":\"{}\",\"sent_msgs\":{},\"sent_bytes\":{},\"recv_msgs\":1,\"recv_bytes\":8}}",
                if (p / 2) == (rank / 2) { "shm" } else { "tcp" }, rank + 1, 8 * (rank + 1))
        }).collect();
        let rec = format!("{{\"rank\":{rank},\"links\":[{}]}}", links.join(","));
        pmi.put(&format!("gw.stats.{rank}"), &rec)
            .unwrap_or_else(|e| fail("put stats", e));
    }
    if abort_then_kill.is_some() {
        // gwrun's teardown (SIGTERM) must not overtake the kill below: the
        // ranks ignore it, gwrun escalates to SIGKILL.
        // SAFETY: changing the disposition of one signal of this process.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
        pmi.put(&format!("pid.{rank}"), &std::process::id().to_string())
            .unwrap_or_else(|e| fail("put pid", e));
    }
    pmi.commit().unwrap_or_else(|e| fail("commit", e));
    pmi.barrier().unwrap_or_else(|e| fail("barrier", e));
    for p in 0..size {
        let got = pmi
            .get_from(p, &format!("check.{p}"))
            .unwrap_or_else(|e| fail("get", e));
        if got.as_deref() != Some(format!("value-of-{p}=ok").as_str()) {
            eprintln!("pmi_check rank {rank}: key check.{p} has {got:?}");
            exit(6);
        }
    }
    if pmi
        .get("no.such.key")
        .unwrap_or_else(|e| fail("get", e))
        .is_some()
    {
        eprintln!("pmi_check rank {rank}: missing key found");
        exit(6);
    }
    for l in 0..lines {
        println!("rank {rank} line {l} {}", "x".repeat(3000));
    }
    println!(
        "rank {rank} of {size}: kvs ok ({} keys checked, kvsname {})",
        size,
        pmi.kvsname()
    );
    let _ = std::io::stdout().flush();

    if let Some((kr, sig)) = kill {
        if kr == r {
            // SAFETY: sending a signal to ourselves.
            unsafe { libc::kill(libc::getpid(), sig as i32) };
            std::thread::sleep(std::time::Duration::from_secs(5));
        }
    }
    if let Some((er, code)) = exitc {
        if er == r {
            exit(code as i32)
        }
    }
    if nofin == Some(r) {
        exit(0)
    }
    if let Some((ar, code)) = abort {
        if ar == r {
            pmi.abort(code as i32, &format!("rank {rank} gives up on purpose"))
                .unwrap_or_else(|e| fail("abort", e));
            std::thread::sleep(std::time::Duration::from_secs(5));
            exit(code as i32);
        }
    }
    if let Some((ar, victim)) = abort_then_kill {
        if ar == r {
            let pid: i32 = pmi
                .get_from(victim as u32, &format!("pid.{victim}"))
                .unwrap_or_else(|e| fail("get pid", e))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            pmi.abort(1, &format!("link to rank {victim} (tcp) failed"))
                .unwrap_or_else(|e| fail("abort", e));
            // Let gwrun see the abort first, as when a peer notices a link
            // break before the launcher reaps the dead rank.
            std::thread::sleep(std::time::Duration::from_millis(50));
            if pid > 0 {
                // SAFETY: kill(2) of a process of this job, by its pid.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_secs(5));
            exit(1);
        }
    }
    if sleep > 0.0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(sleep));
    }
    pmi.finalize().unwrap_or_else(|e| fail("finalize", e));
}
