//! A proxy (`gwrun --proxy`) started by a front end of another protocol
//! version refuses the job: it answers the Hello with a Trouble message
//! naming both versions (which the front end prints) and exits, without
//! starting anything. The front end's side of the check (a Ready of
//! another version loses the link) is the same comparison in
//! `grid::frontend`.

mod common;

use common::GWRUN;
use gridwire_launch::grid::protocol::{
    encode, Frame, FrameReader, Hello, Msg, Plan, PlanHost, PlanSite, VERSION,
};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn plan() -> Plan {
    Plan {
        job_id: "1x2".into(),
        n: 1,
        program: "/bin/true".into(),
        args: vec![],
        wdir: None,
        env: vec![],
        kvsname: "kvs_1x2".into(),
        process_mapping: "(vector,(0,1,1))".into(),
        heartbeat_ms: 10_000,
        sites: vec![PlanSite {
            name: "s".into(),
            leader: 0,
            method: "local".into(),
            reach: vec![],
            prefix: None,
            env: vec![],
            relay: false,
        }],
        hosts: vec![PlanHost {
            name: "h".into(),
            site: 0,
            ranks: vec![0],
        }],
        stage: vec![],
        force_stage: false,
        proxy_hash: "0".repeat(64),
        proxy_size: 1,
        iface: None,
        stdin: false,
        capacity: 0,
    }
}

#[test]
fn a_proxy_refuses_a_front_end_of_another_protocol_version() {
    let mut child = Command::new(GWRUN)
        .arg("--proxy")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let theirs = VERSION + 1;
    let mut bytes = Vec::new();
    encode(
        &Frame::Msg(Msg::Hello(Box::new(Hello {
            version: theirs,
            secret: "ab".repeat(32),
            host: 0,
            plan: plan(),
        }))),
        &mut bytes,
    );
    child.stdin.as_mut().unwrap().write_all(&bytes).unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!status.success(), "the proxy went on: {err}");
    let mut r = FrameReader::new();
    r.push(&out);
    let mut trouble = None;
    while let Ok(Some(f)) = r.next_frame() {
        match f {
            Frame::Msg(Msg::Trouble { msg, .. }) => trouble = Some(msg),
            Frame::Msg(Msg::Ready { .. }) | Frame::Msg(Msg::Started { .. }) => {
                panic!("the proxy accepted a Hello of version {theirs}: {err}")
            }
            _ => {}
        }
    }
    let msg = trouble.unwrap_or_else(|| panic!("no Trouble frame; stderr: {err}"));
    assert!(
        msg.contains(&format!("protocol version {VERSION}")) && msg.contains(&theirs.to_string()),
        "{msg}"
    );
}
