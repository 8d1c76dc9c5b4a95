//! The PMI-2 commands of gwrun's server, on the key-value space, limits and
//! barrier the PMI-1 commands use (a `kvs-fence` is a `barrier_in`).
//!
//! Replies follow MPICH's `pmi-2.0` message list and Hydra 4.0's proxy
//! (`pmip_pmi_v2.c`): `fullinit-response` with `pmi-version=2`, `rank`,
//! `size`, `appnum`; `job-getid-response` with `jobid` (the kvsname);
//! `kvs-get-response` and the `info-get*attr-response`s with
//! `found=TRUE;value=…` or `found=FALSE`; `rc=0` or `rc=-1;errmsg=…`.
//! `abort` has no reply. A value the PMI-2 wire cannot carry back (a `;`,
//! which Hydra and Slurm cannot unescape, or a control character) is
//! refused at `kvs-put` and, when a PMI-1 rank put it, at `kvs-get`.

use gridwire_core::bootstrap::pmi2_wire::{encode, is_v2_key, is_v2_value, Wire2Error, MAX_BODY};
use gridwire_core::bootstrap::pmi_wire::Command;

use super::{line, Notice, Output, Proto, Server, KEYLEN_MAX, VALLEN_MAX};

/// Node attributes a server holds at most (`info-putnodeattr`), and their
/// bytes (key plus value): far beyond the few MPICH puts per node.
pub const NODE_ATTR_MAX_KEYS: usize = 4096;
pub const NODE_ATTR_MAX_BYTES: usize = 16 << 20;

/// Longest value a PMI-2 rank may put: one whose `kvs-get` answer still
/// fits in a frame (the answer's fixed part is 44 bytes).
pub const PMI2_VALUE_MAX: usize = MAX_BODY - 64;

/// Longest error text sent back (it is free text from us or the rank).
const MAX_ERRMSG: usize = 512;

/// The frame for `c`. Everything formatted here is generated or checked;
/// a frame that cannot be encoded is a bug, answered as a generic failure.
pub(super) fn frame(c: Command) -> String {
    let name = format!("{}-response", c.name);
    encode(&c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| internal_error(&name))
}

fn internal_error(name: &str) -> String {
    let name = if is_v2_key(name) { name } else { "error" };
    let body = format!("cmd={name};rc=-1;errmsg=internal error;");
    format!("{:<6}{body}", body.len())
}

/// Free text made safe for a value: no `;`, no control character, bounded
/// on a character boundary.
fn text(s: &str) -> String {
    let mut t: String = s
        .chars()
        .map(|c| if c == ';' || c.is_control() { ' ' } else { c })
        .collect();
    while t.len() > MAX_ERRMSG {
        t.pop();
    }
    t
}

fn ok(name: &str) -> Command {
    Command::new(name).arg("rc", 0)
}

fn failed(name: &str, why: &str) -> Command {
    Command::new(name).arg("rc", -1).arg("errmsg", text(why))
}

fn found(name: &str, value: Option<String>) -> Command {
    match value {
        Some(v) if v.len() > PMI2_VALUE_MAX => failed(
            name,
            &format!(
                "the value is {} bytes, more than the {PMI2_VALUE_MAX} a PMI-2 reply carries",
                v.len()
            ),
        ),
        Some(v) if is_v2_value(&v) => Command::new(name)
            .arg("found", "TRUE")
            .arg("value", v)
            .arg("rc", 0),
        Some(_) => failed(
            name,
            "the value contains ';' or a control character, which PMI-2 cannot carry",
        ),
        None => Command::new(name).arg("found", "FALSE").arg("rc", 0),
    }
}

/// The exit code in the runtime's abort message (`exit code N: …`, see
/// `core::bootstrap::pmi2::Pmi2::abort`); PMI-2's `abort` has no field
/// for it. 1 when there is none.
fn abort_code(msg: &str) -> i32 {
    msg.strip_prefix("exit code ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.trim().parse::<i32>().ok())
        .unwrap_or(1)
}

impl Server {
    /// The PMI-1 style `cmd=init pmi_version=2` line: the rank speaks
    /// PMI-2 from now on; the answer is one PMI-1 line.
    pub(super) fn handle_pmi2_init(&mut self, rank: usize, _cmd: &Command) -> Output {
        if let Some(p) = self.proto.get_mut(rank) {
            *p = Proto::V2;
        }
        Output {
            replies: vec![(
                rank,
                line(
                    Command::new("response_to_init")
                        .arg("pmi_version", 2)
                        .arg("pmi_subversion", 0)
                        .arg("rc", 0),
                ),
            )],
            notices: Vec::new(),
        }
    }

    /// Handles one PMI-2 frame (or why it is not one) from `rank`.
    pub fn handle_pmi2(&mut self, rank: usize, cmd: Result<Command, Wire2Error>) -> Output {
        let mut out = Output::default();
        if let Some(p) = self.proto.get_mut(rank) {
            *p = Proto::V2;
        }
        let cmd = match cmd {
            Ok(c) => c,
            Err(e) => {
                // No PMI-2 reply fits a message that is not one; the
                // client waits for *some* frame, so it gets `cmd=error`,
                // which no request expects (it fails clearly). A length
                // field that cannot be read loses the framing: close.
                let what = e.to_string();
                out.replies.push((rank, frame(failed("error", &what))));
                out.notices.push(
                    if matches!(
                        e,
                        Wire2Error::BadLength(_) | Wire2Error::LengthOutOfRange(_)
                    ) {
                        Notice::Close { rank, what }
                    } else {
                        Notice::Protocol { rank, what }
                    },
                );
                return out;
            }
        };
        let name = format!("{}-response", cmd.name);
        let reply = |out: &mut Output, c: Command| out.replies.push((rank, frame(c)));
        match cmd.name.as_str() {
            "fullinit" => match self.check_identity(rank, &cmd) {
                Ok(()) => {
                    reply(
                        &mut out,
                        Command::new(&name)
                            .arg("pmi-version", 2)
                            .arg("pmi-subversion", 0)
                            .arg("rank", rank)
                            .arg("size", self.size)
                            .arg("appnum", 0)
                            .arg("debugged", "FALSE")
                            .arg("pmiverbose", "FALSE")
                            .arg("rc", 0),
                    );
                    out.notices.push(Notice::Initialized(rank));
                }
                Err(why) => {
                    out.notices.push(Notice::Protocol {
                        rank,
                        what: why.clone(),
                    });
                    reply(&mut out, failed(&name, &why));
                }
            },
            "job-getid" => reply(
                &mut out,
                Command::new(&name).arg("jobid", &self.kvsname).arg("rc", 0),
            ),
            "kvs-put" => {
                let c = match self.pmi2_put(rank, &cmd) {
                    Ok(()) => ok(&name),
                    Err(why) => failed(&name, &why),
                };
                reply(&mut out, c);
            }
            "kvs-fence" => self.enter_barrier(rank, &mut out),
            "kvs-get" => {
                let c = match cmd.get("jobid") {
                    Some(j) if !j.is_empty() && j != self.kvsname => {
                        failed(&name, &format!("unknown job id {j}"))
                    }
                    _ => match cmd.get("key").filter(|k| !k.is_empty()) {
                        Some(k) => found(&name, self.get_kv(k)),
                        None => failed(&name, "missing key"),
                    },
                };
                reply(&mut out, c);
            }
            "info-getjobattr" => {
                let c = match cmd.get("key").filter(|k| !k.is_empty()) {
                    // The mapping is in the space too (`get_kv`), as with
                    // Hydra, which answers other keys from its space.
                    Some("universeSize") => found(&name, Some(self.size.to_string())),
                    Some(k) => found(&name, self.get_kv(k)),
                    None => failed(&name, "missing key"),
                };
                reply(&mut out, c);
            }
            "info-putnodeattr" => {
                let c = match self.put_node_attr(&cmd) {
                    Ok(waiters) => {
                        for (r, v) in waiters {
                            out.replies
                                .push((r, frame(found("info-getnodeattr-response", Some(v)))));
                        }
                        ok(&name)
                    }
                    Err(why) => failed(&name, &why),
                };
                reply(&mut out, c);
            }
            "info-getnodeattr" => match cmd.get("key").filter(|k| !k.is_empty()) {
                None => reply(&mut out, failed(&name, "missing key")),
                Some(k) => {
                    let v = self.node_attrs.get(k).cloned();
                    let wait = cmd
                        .get("wait")
                        .is_some_and(|w| w.eq_ignore_ascii_case("TRUE"));
                    if v.is_none() && wait && rank < self.size {
                        // Answered by the put (Hydra queues it likewise).
                        // A rank waits for one key at a time: a second
                        // request replaces its first, which bounds the list.
                        let key = k.to_string();
                        self.node_attr_waiters.retain(|w| w.0 != rank);
                        self.node_attr_waiters.push((rank, key));
                    } else {
                        reply(&mut out, found(&name, v));
                    }
                }
            },
            "finalize" => {
                reply(&mut out, ok(&name));
                out.notices.push(Notice::Finalized(rank));
            }
            "abort" => {
                // MPICH 4's message list names `exitcode` and `message`;
                // older clients (and the runtime's) send `isworld` and
                // `msg`, with the code inside the message.
                let msg = cmd
                    .get("message")
                    .or_else(|| cmd.get("msg"))
                    .map(text)
                    .unwrap_or_default();
                let code = cmd
                    .get("exitcode")
                    .and_then(|c| c.trim().parse::<i32>().ok())
                    .unwrap_or_else(|| abort_code(&msg));
                out.notices.push(Notice::Abort { rank, code, msg });
            }
            "spawn" => match super::spawn::parse_pmi2_spawn(&cmd) {
                Ok((apps, preput)) => out.notices.push(Notice::Spawn { rank, apps, preput }),
                Err(why) => reply(&mut out, failed(&name, &why)),
            },
            op @ ("name-publish" | "name-unpublish" | "name-lookup") => {
                let service = cmd.get("name").unwrap_or_default().to_string();
                let port = cmd.get("port").unwrap_or_default().to_string();
                let op1 = format!("{}_name", op.trim_start_matches("name-"));
                match self.names.apply(&op1, &service, &port) {
                    Ok(p) if op == "name-lookup" => reply(&mut out, ok(&name).arg("value", p)),
                    Ok(_) => reply(&mut out, ok(&name)),
                    Err(why) => reply(&mut out, failed(&name, &why)),
                }
            }
            other => {
                let what = format!("unsupported PMI-2 command {other:?}");
                reply(
                    &mut out,
                    failed(&name, &format!("{} is not supported by gwrun", text(other))),
                );
                out.notices.push(Notice::Protocol { rank, what });
            }
        }
        out
    }

    /// `pmirank` (or a numeric `pmiid`) must name the rank this connection
    /// was made for: gwrun knows each rank by its socket.
    fn check_identity(&self, rank: usize, cmd: &Command) -> Result<(), String> {
        for field in ["pmirank", "pmiid"] {
            if let Some(v) = cmd.get(field) {
                match v.trim().parse::<usize>() {
                    Ok(r) if r == rank => {}
                    _ => {
                        return Err(format!(
                            "fullinit with {field}={} on the connection of rank {rank}",
                            text(v)
                        ))
                    }
                }
            }
        }
        // `pmijobid` (Slurm's step id) is not checked: gwrun sets no
        // PMI_JOBID, so a value there is only what the rank inherited.
        Ok(())
    }

    fn pmi2_put(&mut self, rank: usize, cmd: &Command) -> Result<(), String> {
        let key = cmd
            .get("key")
            .filter(|k| !k.is_empty())
            .ok_or("missing key")?;
        let value = cmd.get("value").ok_or("missing value")?;
        if !is_v2_key(key) {
            return Err("the key contains ';' or a control character".into());
        }
        if !is_v2_value(value) {
            // It would reach the rank that gets it cut or unreadable.
            return Err("the value contains ';' or a control character".into());
        }
        if value.len() > PMI2_VALUE_MAX {
            return Err(format!(
                "value too long ({} bytes, at most {PMI2_VALUE_MAX} over PMI-2)",
                value.len()
            ));
        }
        self.put_kv(rank, key, value)
            .map_err(|e| e.replace('_', " "))
    }

    /// Stores a node attribute; returns the waiting ranks it answers.
    fn put_node_attr(&mut self, cmd: &Command) -> Result<Vec<(usize, String)>, String> {
        let key = cmd
            .get("key")
            .filter(|k| !k.is_empty())
            .ok_or("missing key")?;
        let value = cmd.get("value").ok_or("missing value")?;
        if !is_v2_key(key) || !is_v2_value(value) {
            return Err("the key or value contains ';' or a control character".into());
        }
        if key.len() >= KEYLEN_MAX {
            return Err("key too long".into());
        }
        if value.len() >= VALLEN_MAX {
            return Err("value too long".into());
        }
        let old = self.node_attrs.get(key).map(|v| key.len() + v.len());
        let bytes = self.node_attr_bytes - old.unwrap_or(0) + key.len() + value.len();
        if old.is_none() && self.node_attrs.len() >= NODE_ATTR_MAX_KEYS {
            return Err(format!(
                "node attributes full (limit of {NODE_ATTR_MAX_KEYS} keys)"
            ));
        }
        if bytes > NODE_ATTR_MAX_BYTES {
            return Err(format!(
                "node attributes full (limit of {NODE_ATTR_MAX_BYTES} bytes)"
            ));
        }
        self.node_attr_bytes = bytes;
        self.node_attrs.insert(key.to_string(), value.to_string());
        let mut answered = Vec::new();
        self.node_attr_waiters.retain(|(r, k)| {
            if k == key {
                answered.push((*r, value.to_string()));
                false
            } else {
                true
            }
        });
        Ok(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Request, KVS_MAX_KEYS_PER_RANK};
    use super::*;
    use gridwire_core::bootstrap::pmi2_wire::{parse_body, parse_length};
    use gridwire_core::bootstrap::pmi_wire::parse_line;

    /// Sends `body` as rank `rank`'s frame.
    fn h(s: &mut Server, rank: usize, body: &str) -> Output {
        s.handle_pmi2(rank, parse_body(body.as_bytes()))
    }

    /// The reply frame, checked to be one well-formed frame, as a command.
    fn decode(f: &str) -> Command {
        let b = f.as_bytes();
        let n = parse_length(&b[..6]).expect("length field");
        assert_eq!(n + 6, b.len(), "one frame: {f:?}");
        parse_body(&b[6..]).expect("body")
    }

    fn only_reply(o: &Output, rank: usize) -> Command {
        assert_eq!(o.replies.len(), 1, "{o:?}");
        assert_eq!(o.replies[0].0, rank);
        decode(&o.replies[0].1)
    }

    #[test]
    fn init_line_and_fullinit_and_jobid() {
        let mut s = Server::new(3, "kvs_j".into(), "(vector,(0,1,3))".into());
        let o = s.handle_request(
            2,
            Request::V2Init(parse_line(b"cmd=init pmi_version=2 pmi_subversion=0").unwrap()),
        );
        assert_eq!(
            o.replies,
            vec![(
                2,
                "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_string()
            )]
        );
        let o = h(&mut s, 2, "cmd=fullinit;pmirank=2;threaded=FALSE;");
        let r = only_reply(&o, 2);
        assert_eq!(r.name, "fullinit-response");
        assert_eq!(
            (
                r.get("rank"),
                r.get("size"),
                r.get("rc"),
                r.get("pmi-version")
            ),
            (Some("2"), Some("3"), Some("0"), Some("2"))
        );
        assert_eq!(o.notices, vec![Notice::Initialized(2)]);
        let r = only_reply(&h(&mut s, 2, "cmd=job-getid;"), 2);
        assert_eq!(r.get("jobid"), Some("kvs_j"));
        // A rank claiming to be another is refused, clearly.
        let o = h(&mut s, 1, "cmd=fullinit;pmirank=0;threaded=FALSE;");
        let r = only_reply(&o, 1);
        assert_eq!(r.get("rc"), Some("-1"));
        assert!(r.get("errmsg").unwrap().contains("pmirank=0"), "{r:?}");
        assert!(matches!(o.notices[0], Notice::Protocol { rank: 1, .. }));
        let r = only_reply(&h(&mut s, 1, "cmd=fullinit;pmiid=x;"), 1);
        assert_eq!(r.get("rc"), Some("-1"));
    }

    /// Puts, the fence across ranks, gets: the fence releases every rank
    /// once, each in its own protocol.
    #[test]
    fn put_fence_get_across_ranks_and_protocols() {
        let mut s = Server::new(3, "k".into(), "(vector,(0,1,3))".into());
        assert_eq!(
            only_reply(&h(&mut s, 0, "cmd=kvs-put;key=a;value=x y=1;"), 0).get("rc"),
            Some("0")
        );
        assert_eq!(
            only_reply(&h(&mut s, 1, "cmd=kvs-put;key=b;value=2;"), 1).get("rc"),
            Some("0")
        );
        assert!(h(&mut s, 0, "cmd=kvs-fence;").replies.is_empty());
        assert!(h(&mut s, 0, "cmd=kvs-fence;").replies.is_empty());
        assert!(h(&mut s, 1, "cmd=kvs-fence;").replies.is_empty());
        // Rank 2 speaks PMI-1 and enters the same barrier.
        let o = s.handle(2, parse_line(b"cmd=barrier_in"));
        let mut to: Vec<usize> = o.replies.iter().map(|r| r.0).collect();
        to.sort();
        assert_eq!(to, vec![0, 1, 2]);
        for (r, bytes) in &o.replies {
            if *r == 2 {
                assert_eq!(bytes, "cmd=barrier_out rc=0\n");
            } else {
                assert_eq!(decode(bytes).name, "kvs-fence-response");
            }
        }
        let r = only_reply(&h(&mut s, 1, "cmd=kvs-get;jobid=k;key=a;"), 1);
        assert_eq!(
            (r.get("found"), r.get("value")),
            (Some("TRUE"), Some("x y=1"))
        );
        let r = only_reply(&h(&mut s, 1, "cmd=kvs-get;key=nope;"), 1);
        assert_eq!((r.get("found"), r.get("rc")), (Some("FALSE"), Some("0")));
        let r = only_reply(&h(&mut s, 1, "cmd=kvs-get;jobid=other;key=a;"), 1);
        assert_eq!(r.get("rc"), Some("-1"));
        // The PMI-1 rank sees PMI-2 puts, but not a value its wire cannot carry.
        let o = s.handle(2, parse_line(b"cmd=get kvsname=k key=b"));
        assert_eq!(o.replies[0].1, "cmd=get_result rc=0 msg=success value=2\n");
        let o = s.handle(2, parse_line(b"cmd=get kvsname=k key=a"));
        assert!(o.replies[0].1.contains("rc=-1"), "{:?}", o.replies);
        // A PMI-1 value with ';' cannot go back over PMI-2.
        s.handle(2, parse_line(b"cmd=put kvsname=k key=c value=a;b"));
        let r = only_reply(&h(&mut s, 0, "cmd=kvs-get;key=c;"), 0);
        assert_eq!(r.get("rc"), Some("-1"));
        let r = only_reply(&h(&mut s, 0, "cmd=kvs-put;key=d;value=a;;b;"), 0);
        assert_eq!(r.get("rc"), Some("-1"));
    }

    #[test]
    fn job_and_node_attributes() {
        let mut s = Server::new(2, "k".into(), "(vector,(0,1,2))".into());
        let r = only_reply(
            &h(&mut s, 0, "cmd=info-getjobattr;key=PMI_process_mapping;"),
            0,
        );
        assert_eq!(r.get("value"), Some("(vector,(0,1,2))"));
        let r = only_reply(&h(&mut s, 0, "cmd=info-getjobattr;key=universeSize;"), 0);
        assert_eq!(r.get("value"), Some("2"));
        let r = only_reply(&h(&mut s, 0, "cmd=info-getjobattr;key=nothing;"), 0);
        assert_eq!(r.get("found"), Some("FALSE"));
        let r = only_reply(&h(&mut s, 0, "cmd=info-getnodeattr;key=n;"), 0);
        assert_eq!(r.get("found"), Some("FALSE"));
        // wait=TRUE: answered by the put.
        assert!(h(&mut s, 1, "cmd=info-getnodeattr;key=n;wait=TRUE;")
            .replies
            .is_empty());
        let o = h(&mut s, 0, "cmd=info-putnodeattr;key=n;value=v1;");
        assert_eq!(o.replies.len(), 2);
        let to1 = o.replies.iter().find(|r| r.0 == 1).unwrap();
        assert_eq!(decode(&to1.1).get("value"), Some("v1"));
        let to0 = o.replies.iter().find(|r| r.0 == 0).unwrap();
        assert_eq!(decode(&to0.1).name, "info-putnodeattr-response");
        let r = only_reply(&h(&mut s, 1, "cmd=info-getnodeattr;key=n;"), 1);
        assert_eq!(r.get("value"), Some("v1"));
    }

    #[test]
    fn abort_finalize_unsupported_and_garbage() {
        let mut s = Server::new(2, "k".into(), String::new());
        let o = h(&mut s, 1, "cmd=abort;isworld=TRUE;msg=exit code 7: oh no;");
        assert!(o.replies.is_empty());
        assert_eq!(
            o.notices,
            vec![Notice::Abort {
                rank: 1,
                code: 7,
                msg: "exit code 7: oh no".into()
            }]
        );
        let o = h(&mut s, 0, "cmd=abort;isworld=TRUE;msg=plain;");
        assert!(matches!(o.notices[0], Notice::Abort { code: 1, .. }));
        let o = h(&mut s, 0, "cmd=abort;exitcode=9;message=mpich 4;");
        assert_eq!(
            o.notices,
            vec![Notice::Abort {
                rank: 0,
                code: 9,
                msg: "mpich 4".into()
            }]
        );
        let o = h(&mut s, 0, "cmd=finalize;");
        assert_eq!(only_reply(&o, 0).name, "finalize-response");
        assert_eq!(o.notices, vec![Notice::Finalized(0)]);
        let o = h(&mut s, 0, "cmd=spawn;ncmds=1;");
        let r = only_reply(&o, 0);
        assert_eq!(
            (r.name.as_str(), r.get("rc")),
            ("spawn-response", Some("-1"))
        );
        // A malformed spawn (no program named) is refused, nothing starts.
        assert!(o.notices.is_empty());
        // A body that is not a command: an error frame, the stream goes on.
        let o = h(&mut s, 0, "garbage");
        assert_eq!(only_reply(&o, 0).name, "error");
        assert!(matches!(o.notices[0], Notice::Protocol { .. }));
        // A length beyond the limit: error frame, then close.
        let o = s.handle_pmi2(0, Err(Wire2Error::LengthOutOfRange(999_999)));
        assert_eq!(only_reply(&o, 0).get("rc"), Some("-1"));
        assert!(matches!(o.notices[0], Notice::Close { rank: 0, .. }));
        // A command name with a control character still gets a frame.
        let o = h(&mut s, 0, "cmd=a\u{1}b;");
        assert_eq!(only_reply(&o, 0).get("rc"), Some("-1"));
        // A rank the job does not have gets replies, never a panic.
        let o = h(&mut s, 9, "cmd=kvs-put;key=a;value=1;");
        assert_eq!(only_reply(&o, 9).get("rc"), Some("-1"));
        h(&mut s, 9, "cmd=kvs-fence;");
        h(&mut s, 9, "cmd=info-getnodeattr;key=z;wait=TRUE;");
        assert!(s.node_attr_waiters.is_empty());
    }

    /// The PMI-1 limits hold for PMI-2 puts, with a clear reason.
    #[test]
    fn limits() {
        let mut s = Server::new(1, "k".into(), String::new());
        let long_key = "k".repeat(KEYLEN_MAX);
        let r = only_reply(
            &h(&mut s, 0, &format!("cmd=kvs-put;key={long_key};value=1;")),
            0,
        );
        assert!(r.get("errmsg").unwrap().contains("key too long"), "{r:?}");
        for i in 0..KVS_MAX_KEYS_PER_RANK {
            let o = h(&mut s, 0, &format!("cmd=kvs-put;key=k{i};value=v;"));
            assert_eq!(only_reply(&o, 0).get("rc"), Some("0"));
        }
        let r = only_reply(&h(&mut s, 0, "cmd=kvs-put;key=more;value=v;"), 0);
        assert!(r.get("errmsg").unwrap().contains("kvs full"), "{r:?}");
        // The longest body a frame carries still answers within one frame.
        let v = "v".repeat(PMI2_VALUE_MAX + 1);
        let o = h(&mut s, 0, &format!("cmd=kvs-put;key=k0;value={v};"));
        let r = only_reply(&o, 0);
        assert!(r.get("errmsg").unwrap().contains("value too long"), "{r:?}");
        let v = "v".repeat(PMI2_VALUE_MAX);
        let o = h(&mut s, 0, &format!("cmd=kvs-put;key=k0;value={v};"));
        assert_eq!(only_reply(&o, 0).get("rc"), Some("0"));
        let r = only_reply(&h(&mut s, 0, "cmd=kvs-get;key=k0;"), 0);
        assert_eq!(r.get("value").map(str::len), Some(v.len()));
        // Node attributes are bounded too.
        for i in 0..NODE_ATTR_MAX_KEYS {
            h(
                &mut s,
                0,
                &format!("cmd=info-putnodeattr;key=n{i};value=v;"),
            );
        }
        let r = only_reply(&h(&mut s, 0, "cmd=info-putnodeattr;key=x;value=v;"), 0);
        assert!(r.get("errmsg").unwrap().contains("full"), "{r:?}");
    }

    /// Partial (proxy) servers: a PMI-2 fence is the host's part of the
    /// job's fence, released by the front end.
    #[test]
    fn partial_fence_waits_for_the_front_end() {
        let mut s = Server::new_partial(4, "k".into(), String::new(), &[2, 3]);
        h(&mut s, 2, "cmd=kvs-put;key=a;value=1;");
        assert!(h(&mut s, 2, "cmd=kvs-fence;").notices.is_empty());
        let o = s.handle(3, parse_line(b"cmd=barrier_in"));
        assert_eq!(o.notices, vec![Notice::BarrierReady { world: 0 }]);
        assert!(o.replies.is_empty());
        assert_eq!(s.take_fresh(), vec![("a".into(), "1".into())]);
        s.insert_remote(vec![("b".into(), "2".into())]).unwrap();
        let o = s.release_barrier();
        assert_eq!(o.replies.len(), 2);
        let to2 = o.replies.iter().find(|r| r.0 == 2).unwrap();
        assert_eq!(decode(&to2.1).name, "kvs-fence-response");
        let to3 = o.replies.iter().find(|r| r.0 == 3).unwrap();
        assert_eq!(to3.1, "cmd=barrier_out rc=0\n");
        let r = only_reply(&h(&mut s, 2, "cmd=kvs-get;key=b;"), 2);
        assert_eq!(r.get("value"), Some("2"));
    }
}
