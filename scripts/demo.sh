#!/bin/bash
# make demo: the main job across 2 sites x 2 hosts of the grid testbed
# (real network, mount, UTS, PID and IPC namespaces, sshd on every host,
# 10 ms one-way WAN delay between sites), started by one `gwrun -f` from
# the testbed's `login` host with the machines file the testbed wrote; the
# hosts have no gridwire, so gwrun stages its proxy and the program. Where
# the testbed cannot be built (not root, no namespaces, no sshd) it runs
# the same job on emulated hosts of this machine and says why in one line.
set -u
R=${R:-target/release}
ROOT=$(pwd)
RANKS=${DEMO_RANKS:-8}

emulated() {
    "$R/gwinfo" --emulate-hosts 2 --methods-only
    echo
    exec "$R/gwrun" -n "${DEMO_RANKS:-4}" --emulate-hosts 2 --timeout 120 --stats "$R/examples/demo"
}

if ! why=$("$R/gw-testbed" check 2>&1); then
    echo "demo: no grid testbed here ($(printf '%s' "$why" | grep -v '^ok' | head -1)); running on 2 emulated hosts instead" >&2
    emulated
fi
if ! env_out=$("$R/gw-testbed" up --sites 2 --hosts 2 --wan-delay 10 2>/tmp/gw-demo-up.$$); then
    echo "demo: gw-testbed up failed ($(tail -1 /tmp/gw-demo-up.$$)); running on 2 emulated hosts instead" >&2
    rm -f /tmp/gw-demo-up.$$
    emulated
fi
rm -f /tmp/gw-demo-up.$$
eval "$env_out"
trap '"$R/gw-testbed" down --id "$GW_TESTBED_ID" >/dev/null 2>&1' EXIT
# Two ranks per host: shm within a host, tcp across the LAN and the WAN.
machines="$(dirname "$GW_TESTBED_MACHINES")/machines-demo"
sed -E 's/^(s[0-9]+h[0-9]+)$/\1:2/' "$GW_TESTBED_MACHINES" > "$machines"
echo "== the machines file ($machines)"
grep -v '^#' "$machines" | grep -v '^$'
echo "== gwrun -f $machines -n $RANKS --stats demo   (on host login; the compute hosts have no gridwire)"
"$R/gw-testbed" exec --id "$GW_TESTBED_ID" login \
    "$ROOT/$R/gwrun" -f "$machines" -n "$RANKS" --tag-output --timeout 120 --stats "$ROOT/$R/examples/demo"
