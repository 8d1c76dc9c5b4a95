//! The address descriptors tcp and udp publish (`method::netaddr`).

use crate::method::netaddr::{IfAddr, Published};

/// Parses `data` as a peer's tcp/udp address descriptor and, when it
/// parses, orders its addresses as a connector would, from a process in
/// another network namespace whose interface addresses are taken from the
/// first published ones; checks that what parsed encodes and parses back
/// to the same. Never panics; allocates at most a few KiB (a descriptor is
/// at most 1 KiB and 16 addresses).
pub fn net_descriptor(data: &[u8]) {
    let Some(p) = Published::parse(data) else {
        return;
    };
    let again = Published::parse(&p.encode());
    assert_eq!(again.as_ref(), Some(&p), "descriptor does not round-trip");
    let mine: Vec<IfAddr> = p.addrs.iter().take(2).copied().collect();
    // Not hex: no parsed namespace key equals it.
    let got = p.candidates("elsewhere", &mine);
    assert!(got.len() <= crate::method::netaddr::MAX_ADDRS.max(1));
    assert!(
        p.legacy.is_some() || got.iter().all(|a| !a.ip().is_loopback()),
        "loopback offered across namespaces: {got:?}"
    );
    if let Some(ns) = &p.netns {
        // From the same namespace: loopback only.
        let same = p.candidates(ns, &mine);
        assert!(same.len() == 1 && same[0].ip().is_loopback(), "{same:?}");
    }
    let _ = p.describe();
}
