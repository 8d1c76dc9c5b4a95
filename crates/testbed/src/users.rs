//! `--user NAME`: a non-root user who logs in to every host with the
//! testbed's key, so permission bugs are not hidden by root.
//!
//! sshd without PAM refuses an account whose password is locked (`!` in
//! /etc/shadow), as accounts made without a password are; and a fresh
//! machine may have no non-root user at all. So the hosts get their own
//! copies of /etc/shadow (that user: no password, key logins only, as
//! everybody on the testbed) and, when the machine does not know the name,
//! of /etc/passwd and /etc/group with the user added — bound over the
//! originals in the hosts' own mount namespaces only. The machine's files
//! are never changed.

use crate::plan::Plan;
use crate::sys::{self, Result};
use std::os::unix::fs::MetadataExt;

/// First uid/gid tried for a user of the testbed only (Debian leaves
/// 60000-64999 to the administrator's dynamic users).
const LOCAL_ID_BASE: u32 = 60_500;

pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !name.starts_with('-');
    if !ok {
        return Err(format!("--user {name:?}: not a valid user name"));
    }
    if let Ok(pw) = sys::passwd(name) {
        if pw.uid == 0 {
            return Err(format!("--user {name}: not a non-root user"));
        }
    }
    Ok(())
}

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

/// Ids used in the 3rd (passwd: uid, group: gid) field of a database.
fn used_ids(text: &str, field: usize) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.split(':').nth(field)?.parse().ok())
        .collect()
}

/// Writes the hosts' copies (`passwd`, `group`, `shadow` in the instance
/// directory; init binds whichever exists) and gives the user the key.
pub fn prepare(plan: &Plan, name: &str) -> Result<()> {
    let dir = plan.dir();
    let (uid, gid, extra_shadow) = match sys::passwd(name) {
        Ok(pw) => (pw.uid, pw.gid, String::new()),
        Err(_) => {
            let passwd = read("/etc/passwd")?;
            let group = read("/etc/group")?;
            let mut taken = used_ids(&passwd, 2);
            taken.extend(used_ids(&passwd, 3));
            taken.extend(used_ids(&group, 2));
            let id = (LOCAL_ID_BASE..65_000)
                .find(|i| !taken.contains(i))
                .ok_or("no free uid for --user")?;
            let mut p = passwd;
            p.push_str(&format!(
                "{name}:x:{id}:{id}:gw-testbed user:/home/{name}:/bin/bash\n"
            ));
            let mut g = group;
            g.push_str(&format!("{name}:x:{id}:\n"));
            sys::write_file(&dir.join("passwd"), &p, 0o644)?;
            sys::write_file(&dir.join("group"), &g, 0o644)?;
            (id, id, format!("{name}:*:19000:0:99999:7:::\n"))
        }
    };
    let meta = std::fs::metadata("/etc/shadow").map_err(|e| format!("/etc/shadow: {e}"))?;
    let text = read("/etc/shadow")?;
    let mut out = String::with_capacity(text.len() + extra_shadow.len());
    for line in text.lines() {
        let mut fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 1 && fields[0] == name && fields[1].starts_with('!') {
            fields[1] = "*";
        }
        out.push_str(&fields.join(":"));
        out.push('\n');
    }
    out.push_str(&extra_shadow);
    let shadow = dir.join("shadow");
    sys::write_file(&shadow, &out, 0o640)?;
    sys::chown(&shadow, 0, meta.gid())?;
    // The user's ssh refuses a key it does not own; root's ssh reads a key
    // of another owner without complaint, so one key serves both.
    for f in ["id_ed25519", "id_ed25519.pub"] {
        sys::chown(&plan.ssh_dir().join(f), uid, gid)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_checked() {
        assert!(check_name("gwuser").is_ok());
        assert!(check_name("root").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name("-x").is_err());
        assert!(check_name("x:0").is_err());
    }

    #[test]
    fn used_ids_reads_the_third_field() {
        let t = "root:x:0:0::/root:/bin/bash\nbob:x:1000:1001::/home/bob:/bin/sh\n";
        assert_eq!(used_ids(t, 2), [0, 1000]);
        assert_eq!(used_ids(t, 3), [0, 1001]);
    }
}
