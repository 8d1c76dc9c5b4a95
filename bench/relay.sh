#!/usr/bin/env bash
# Relays on gw-testbed (issue 13), run by `make bench`: 2 sites x 2 hosts,
# s1 firewalled (--firewall s1), no WAN delay. Between s0h0 and s1h0 (the
# gateway: reached directly, encrypt+tcp) against s0h0 and s1h1 (behind the
# firewall: through the relay on s1h0, encrypt+relay(s1h0)+tcp); both are
# encrypted, so the difference is the relay's. 8 B one-way latency and
# streaming bandwidth at 4 MiB and 32 KiB (crates/core/examples/wan_bench.rs),
# medians (and least latency) of RELAY_RUNS (9) interleaved runs.
# Prints Markdown for docs/benchmarks.md. Needs root (gw-testbed); without
# it prints SKIPPED and exits 0 (a benchmark, not a test).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
REL=$T/release
RUNS=${RELAY_RUNS:-9}
SECS=${RELAY_SECS:-1.5}
OUT=bench/out/relay
mkdir -p "$OUT"

if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/relay.sh: gw-testbed needs root" >&2; exit 0; fi
cargo build -q --release -p gridwire-core --example wan_bench
cargo build -q --release -p gridwire-launch -p gridwire-linkemu -p gridwire-testbed
TB=$REL/gw-testbed
if ! why=$(GW_LINKEMU=$REL/gw-linkemu "$TB" check 2>&1); then
    echo "SKIPPED: bench/relay.sh: gw-testbed check: $why" >&2; exit 0
fi

WORK=/var/tmp/gw-bench-relay-$$
mkdir -p "$WORK"
cp "$REL/examples/wan_bench" "$WORK/"
ID="br$$"
ID=${ID:0:12}
cleanup() { "$TB" down --id "$ID" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID" --shared-fs --sites 2 --hosts 2 --firewall s1 2>"$OUT/up.err") || {
    echo "gw-testbed up failed: $(tail -3 "$OUT/up.err")" >&2; exit 1; }
eval "$env"
SO="ssh_options=\"-F $GW_TESTBED_SSH_CONFIG\""
# Direct: the gateway's own rank. Relayed: s1h1, the gateway runs no rank.
printf '[site s0] start=ssh %s\ns0h0\n[site s1] start=ssh gateway=s1h0 %s\ns1h0\n' "$SO" "$SO" >"$WORK/m-direct"
printf '[site s0] start=ssh %s\ns0h0\n[site s1] start=ssh gateway=s1h0 %s\ns1h1\ns1h0\n' "$SO" "$SO" >"$WORK/m-relay"

net() {
    "$TB" exec --id "$ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" \
        timeout 120 "$REL/gwrun" -f "$WORK/m-$1" -n 2 --map-by host \
        --timeout 100 "$WORK/wan_bench" net random "$SECS" 4194304 32768 2>>"$OUT/err" | grep -E '^(lat|bw|method) ' || true
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR+1)/2)]}'; }
least() { sort -g | awk 'NR == 1 {print; f = 1} END {if (!f) print "-"}'; }
get() { awk -v k="$1" -v s="$2" '$1==k && $2==s {print $3}' "$3" | median; }
getleast() { awk -v k="$1" -v s="$2" '$1==k && $2==s {print $3}' "$3" | least; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
diff_us() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-") print "-"; else printf "%+.1f", a - b}'; }

d=$OUT/direct; r=$OUT/relay
: >"$d"; : >"$r"
for _ in $(seq "$RUNS"); do
    net direct >>"$d"
    net relay >>"$r"
done
grep -q "method encrypt+relay(s1h0)+tcp" "$r" || echo "bench/relay.sh: the relayed runs did not go through the relay" >&2
grep -q "method encrypt+tcp" "$d" || echo "bench/relay.sh: the direct runs were not encrypt+tcp" >&2

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -srm), $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "encrypt+relay(s1h0)+tcp (s0h0 -> s1h1) vs encrypt+tcp (s0h0 -> s1h0), no WAN delay, medians of $RUNS interleaved runs (MB = 10^6 B/s of payload; latency one-way, half the 8 B round trip):"
echo
echo "| | 4 MiB MB/s | 32 KiB MB/s | 8 B us (median / least) |"
echo "| --- | --- | --- | --- |"
db4=$(get bw 4194304 "$d"); rb4=$(get bw 4194304 "$r")
db32=$(get bw 32768 "$d"); rb32=$(get bw 32768 "$r")
dl=$(get lat 8 "$d"); rl=$(get lat 8 "$r"); dll=$(getleast lat 8 "$d"); rll=$(getleast lat 8 "$r")
echo "| direct | $db4 | $db32 | $dl / $dll |"
echo "| relay | $rb4 | $rb32 | $rl / $rll |"
echo "| relay / direct | $(ratio "$rb4" "$db4") | $(ratio "$rb32" "$db32") | added $(diff_us "$rl" "$dl") / $(diff_us "$rll" "$dll") |"
