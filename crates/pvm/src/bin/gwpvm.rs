//! `gwpvm`: the console of the PVM face. Commands as PVM's console names
//! them: `conf`, `add host…`, `delete host…`, `ps`, `spawn [-N] program
//! [args]`, `halt`; given as arguments (`gwpvm ps`) or read one per line
//! from standard input. `add` starts a host as `pvm_addhosts` does (a host
//! of `$GWPVM_MACHINES` over ssh, any other name emulated on this machine).
//! `gwpvm --pvm-host` is a remote host's agent (see `pvm3::agent`).

use pvm3::conn::Conn;
use pvm3::consts::*;
use pvm3::coord::{self, hex, unhex};
use std::io::BufRead;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A remote host's agent, started over ssh by the coordinator.
    if args.first().is_some_and(|a| a == "--pvm-host") {
        std::process::exit(pvm3::agent::run());
    }
    let code = if args.is_empty() {
        let mut code = 0;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let words: Vec<String> = line.split_whitespace().map(String::from).collect();
            if words.first().is_some_and(|w| w == "quit") {
                break;
            }
            if !words.is_empty() {
                code = run(&words);
            }
        }
        code
    } else {
        run(&args)
    };
    std::process::exit(code);
}

fn request(s: &Conn, line: &str) -> Result<String, i32> {
    use std::io::{BufReader, Write};
    let mut w = s;
    w.write_all(format!("{line}\n").as_bytes())
        .map_err(|_| PVM_SYS_ERR)?;
    // Event lines the coordinator broadcasts (`HOSTADD …`) may come first:
    // the answer is the first line that starts with OK or ERR.
    let mut rd = BufReader::new(s);
    let mut reply = String::new();
    loop {
        reply.clear();
        if rd.read_line(&mut reply).map_err(|_| PVM_SYS_ERR)? == 0 {
            return Err(PVM_SYS_ERR);
        }
        if reply.starts_with("OK") || reply.starts_with("ERR") {
            break;
        }
    }
    match reply.trim().strip_prefix("OK") {
        Some(r) => Ok(r.trim().to_string()),
        None => Err(reply
            .trim()
            .strip_prefix("ERR ")
            .and_then(|c| c.parse().ok())
            .unwrap_or(PVM_SYS_ERR)),
    }
}

fn run(words: &[String]) -> i32 {
    let (s, _info) = match coord::connect_or_start() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("gwpvm: {e}");
            return 1;
        }
    };
    match words[0].as_str() {
        "conf" => match request(&s, "HOSTS") {
            Ok(rows) => {
                let hosts: Vec<(i32, String)> = rows
                    .split(';')
                    .filter_map(|r| {
                        let (d, n) = r.split_once(',')?;
                        Some((d.parse().ok()?, String::from_utf8(unhex(n)?).ok()?))
                    })
                    .collect();
                let n = hosts.len();
                println!("{n} host{}, 1 data format", if n == 1 { "" } else { "s" });
                println!("                    HOST     DTID     ARCH   SPEED       DSIG");
                for (dtid, name) in hosts {
                    println!(
                        "{:>24} {:>8x} {:>8} {:>7} 0x{:08x}",
                        name,
                        dtid,
                        pvm3::spawn::arch(),
                        1000,
                        0x0040_8841
                    );
                }
                0
            }
            Err(e) => {
                eprintln!("gwpvm: conf: {}", error_text(e));
                1
            }
        },
        "add" | "delete" => {
            if words.len() < 2 {
                eprintln!("gwpvm: {} host…", words[0]);
                return 1;
            }
            let req = if words[0] == "add" {
                "ADDHOST"
            } else {
                "DELHOST"
            };
            let mut code = 0;
            let mut done = 0;
            let mut lines = Vec::new();
            for h in &words[1..] {
                match request(&s, &format!("{req} {}", hex(h.as_bytes()))) {
                    Ok(_) => {
                        done += 1;
                        lines.push(format!("{h:>24}"));
                    }
                    Err(e) => {
                        code = 1;
                        lines.push(format!("{h:>24} {}", error_text(e)));
                    }
                }
            }
            println!("{done} successful",);
            println!("{:>24}", "HOST");
            for l in lines {
                println!("{l}");
            }
            code
        }
        "ps" => match request(&s, "TASKS 0") {
            Ok(rows) => {
                println!(
                    "{:>24} {:>8} {:>8} {:>8} COMMAND",
                    "HOST", "TID", "PTID", "PID"
                );
                for row in rows.split(';').filter(|r| !r.is_empty()) {
                    let f: Vec<&str> = row.split(',').collect();
                    let [tid, ptid, pid, name, _host] = f[..] else {
                        continue;
                    };
                    let name =
                        String::from_utf8(unhex(name).unwrap_or_default()).unwrap_or_default();
                    let tid: i32 = tid.parse().unwrap_or(0);
                    let ptid: i32 = ptid.parse().unwrap_or(0);
                    let ptid = if ptid > 0 {
                        format!("{ptid:x}")
                    } else {
                        "-".into()
                    };
                    println!(
                        "{:>24} {:>8x} {:>8} {:>8} {name}",
                        pvm3::spawn::hostname(),
                        tid,
                        ptid,
                        pid
                    );
                }
                0
            }
            Err(e) => {
                eprintln!("gwpvm: ps: {}", error_text(e));
                1
            }
        },
        "halt" => {
            let _ = request(&s, "HALT");
            0
        }
        "spawn" => spawn(&words[1..]),
        other => {
            eprintln!(
                "gwpvm: unknown command {other:?} (conf, add, delete, ps, spawn, halt, quit)"
            );
            1
        }
    }
}

fn spawn(words: &[String]) -> i32 {
    let mut count = 1;
    let mut rest = words;
    if let Some(n) = rest
        .first()
        .and_then(|w| w.strip_prefix('-'))
        .and_then(|n| n.parse().ok())
    {
        count = n;
        rest = &rest[1..];
    }
    let Some(name) = rest.first() else {
        eprintln!("gwpvm: spawn [-N] program [args]");
        return 1;
    };
    let t = match pvm3::task::task() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gwpvm: {}", error_text(e));
            return 1;
        }
    };
    let mut tids = vec![0; count.max(1)];
    let n = pvm3::spawn::spawn(t, name, &rest[1..], PVM_NO_SPAWN_PARENT, "", &mut tids);
    println!("{n} successful");
    for tid in &tids {
        if *tid > 0 {
            println!("t{tid:x}");
        } else {
            println!("{}", error_text(*tid));
        }
    }
    t.exit();
    if n == tids.len() as i32 {
        0
    } else {
        1
    }
}
