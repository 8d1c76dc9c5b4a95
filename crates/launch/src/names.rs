//! The name service of `MPI_Publish_name`/`Lookup_name`/`Unpublish_name`.
//!
//! Each gwrun keeps a table for its job. With `GW_NAMESERVER=HOST:PORT`
//! in gwrun's environment it asks the name server there instead
//! (`gw-nameserver`, which outlives single jobs, as Hydra's
//! `hydra_nameserver` does), so separately started jobs see each other's
//! names. The server speaks one line per request and answer:
//! `publish SERVICE PORT`, `lookup SERVICE`, `unpublish SERVICE`, answered
//! `ok [PORT]` or `err REASON`; names and ports are percent-escaped as PMI
//! values are, and everything is bounded.

use gridwire_core::bootstrap::pmi_wire::{escape_value, unescape_value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Most names one table holds, and the longest name or port (bytes).
pub const MAX_NAMES: usize = 65536;
pub const MAX_LEN: usize = 1024;
/// How long gwrun waits for the name server.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A table of published names.
#[derive(Debug, Default)]
pub struct Names {
    map: HashMap<String, String>,
}

impl Names {
    /// One request: `op` is `publish_name`, `unpublish_name` or
    /// `lookup_name`. `Ok(port)` (empty but for a look-up) or why not.
    pub fn apply(&mut self, op: &str, service: &str, port: &str) -> Result<String, String> {
        if service.is_empty() || service.len() > MAX_LEN || port.len() > MAX_LEN {
            return Err("invalid_service_name_or_port".into());
        }
        match op {
            "publish_name" => {
                if self.map.contains_key(service) {
                    return Err("service_already_published".into());
                }
                if self.map.len() >= MAX_NAMES {
                    return Err("name_table_full".into());
                }
                self.map.insert(service.into(), port.into());
                Ok(String::new())
            }
            "unpublish_name" => self
                .map
                .remove(service)
                .map(|_| String::new())
                .ok_or_else(|| "service_not_published".into()),
            "lookup_name" => self
                .map
                .get(service)
                .cloned()
                .ok_or_else(|| "service_not_found".into()),
            _ => Err("unknown_operation".into()),
        }
    }
}

/// Where gwrun's name requests go.
#[derive(Debug)]
pub enum NameService {
    Local(Names),
    Remote(String),
}

impl NameService {
    /// `GW_NAMESERVER`, or a table of this gwrun's own.
    pub fn from_env() -> NameService {
        match std::env::var("GW_NAMESERVER") {
            Ok(a) if !a.trim().is_empty() => NameService::Remote(a.trim().to_string()),
            _ => NameService::Local(Names::default()),
        }
    }

    /// One request (see [`Names::apply`]); a name server that does not
    /// answer is an error (after at most [`TIMEOUT`]).
    pub fn apply(&mut self, op: &str, service: &str, port: &str) -> Result<String, String> {
        match self {
            NameService::Local(n) => n.apply(op, service, port),
            NameService::Remote(addr) => remote(addr, op, service, port),
        }
    }
}

fn remote(addr: &str, op: &str, service: &str, port: &str) -> Result<String, String> {
    let word = op.trim_end_matches("_name");
    let line = if op == "publish_name" {
        format!("{word} {} {}\n", escape_value(service), escape_value(port))
    } else {
        format!("{word} {}\n", escape_value(service))
    };
    let unreachable = |e: std::io::Error| format!("name_server_{addr}_unreachable:{e}");
    let sa = addr
        .to_socket_addrs()
        .map_err(unreachable)?
        .next()
        .ok_or_else(|| format!("name_server_{addr}_has_no_address"))?;
    let mut s = TcpStream::connect_timeout(&sa, TIMEOUT).map_err(unreachable)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(unreachable)?;
    s.write_all(line.as_bytes()).map_err(unreachable)?;
    let mut answer = String::new();
    BufReader::new(s.take(4 * MAX_LEN as u64))
        .read_line(&mut answer)
        .map_err(unreachable)?;
    let mut words = answer.split_whitespace();
    match (words.next(), words.next()) {
        (Some("ok"), p) => Ok(p.map(unescape_value).unwrap_or_default()),
        (Some("err"), why) => Err(why.unwrap_or("refused").to_string()),
        _ => Err("name_server_answered_nonsense".into()),
    }
}

use std::io::Read;

/// Answers one request line of the server protocol.
pub fn answer(names: &mut Names, line: &str) -> String {
    let w: Vec<&str> = line.split_whitespace().collect();
    let r = match w[..] {
        ["publish", s, p] => names.apply("publish_name", &unescape_value(s), &unescape_value(p)),
        ["lookup", s] => names.apply("lookup_name", &unescape_value(s), ""),
        ["unpublish", s] => names.apply("unpublish_name", &unescape_value(s), ""),
        _ => Err("bad_request".into()),
    };
    match r {
        Ok(p) if p.is_empty() => "ok\n".into(),
        Ok(p) => format!("ok {}\n", escape_value(&p)),
        Err(why) => format!("err {}\n", escape_value(&why)),
    }
}

/// The name server: answers connections one at a time, one request each
/// (requests are rare and tiny; a client that stalls is dropped after a
/// few seconds).
pub fn serve(listener: TcpListener) -> std::io::Result<()> {
    let mut names = Names::default();
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        let Ok(reader) = s.try_clone() else { continue };
        if BufReader::new(reader.take(4 * MAX_LEN as u64))
            .read_line(&mut line)
            .is_err()
        {
            continue;
        }
        let _ = s.write_all(answer(&mut names, &line).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rules() {
        let mut n = Names::default();
        assert!(n.apply("lookup_name", "svc", "").is_err());
        assert_eq!(n.apply("publish_name", "svc", "p1"), Ok(String::new()));
        assert!(n.apply("publish_name", "svc", "p2").is_err());
        assert_eq!(n.apply("lookup_name", "svc", "").as_deref(), Ok("p1"));
        assert!(n.apply("unpublish_name", "svc", "").is_ok());
        assert!(n.apply("unpublish_name", "svc", "").is_err());
        assert!(n.apply("publish_name", "", "p").is_err());
        assert_eq!(answer(&mut n, "publish a%20b port:1\n"), "ok\n");
        assert_eq!(answer(&mut n, "lookup a%20b\n"), "ok port:1\n");
        assert!(answer(&mut n, "junk\n").starts_with("err"));
    }

    #[test]
    fn server_outlives_clients() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || serve(l));
        let mut a = NameService::Remote(addr.clone());
        assert_eq!(
            a.apply("publish_name", "x y", "gwport:1"),
            Ok(String::new())
        );
        let mut b = NameService::Remote(addr);
        assert_eq!(b.apply("lookup_name", "x y", "").as_deref(), Ok("gwport:1"));
        assert!(b.apply("publish_name", "x y", "other").is_err());
        assert!(b.apply("unpublish_name", "x y", "").is_ok());
        assert!(a.apply("lookup_name", "x y", "").is_err());
    }
}
