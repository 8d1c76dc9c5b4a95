#!/usr/bin/env bash
# Interleaved A/B of gridwire's hierarchical collectives on one gw-testbed
# (issue 14): the same coll_lat job (bench/c/coll_lat.c, plain, GW_COLL=hier)
# run alternately with each variant's environment, COLLHAB_ROUNDS (2) rounds,
# on COLLHAB_SITES (2) sites x 2 hosts x 2 ranks, COLLHAB_DELAY (10) ms
# one-way WAN delay, site-by-site placement, hosts on reno (as
# bench/coll-hier.sh), gridwire with GW_SPIN_US=0 and GW_ENCRYPT=never.
#
#   COLLHAB_A / COLLHAB_B   VAR=VALUE words of each variant (default: none;
#                           part 5 of issue 14 used a temporary switch of
#                           commit 2dfe8ff, GW_HIER4_ROOT_WAN=1, for A)
#   COLLHAB_ENV             words for both (e.g. COLL_OPS=reduce,bcast
#                           COLL_MARGIN_MS=250)
#   COLLHAB_ITERS (15), COLLHAB_MAXBYTES (65536), COLLHAB_TCP_TUNING (0)
#   COLLHAB_PLACEMENT       site (ranks site by site, default) or rr (round-
#                           robin over the hosts, as bench/coll-hier.sh)
#   COLLHAB_A_SYSCTL / COLLHAB_B_SYSCTL
#                           sysctl KEY=VALUE words set on every compute host
#                           before each of that variant's jobs (per network
#                           namespace, e.g. net.ipv4.tcp_slow_start_after_idle=0
#                           for one and =1 for the other: give both)
#   COLLHAB_ZERO (0)        1: afterwards the same rounds on a testbed without
#                           WAN delay, and a second table: what the WAN adds
#                           per variant, in one-way delays (median with delay
#                           minus median without, over the ping's delay)
#
# Prints one line per figure ("coll OP BYTES ROOT LABEL US", LABEL =
# variant:round) and a table: per operation and size, each variant's median
# over the rounds for root 0 and root last, and root last minus root 0 in
# one-way delays (ping, same run). Raw lines also in bench/out/coll-hier-ab/runs.txt. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
REL=${REL:-target/release}
REL=$(cd "$REL" && pwd)
SITES=${COLLHAB_SITES:-2}
DELAY=${COLLHAB_DELAY:-10}
ITERS=${COLLHAB_ITERS:-15}
MAXB=${COLLHAB_MAXBYTES:-65536}
ROUNDS=${COLLHAB_ROUNDS:-2}
A=${COLLHAB_A-}
B=${COLLHAB_B-}
PLACEMENT=${COLLHAB_PLACEMENT:-site}
case $PLACEMENT in site) gwmap=slot ;; rr) gwmap=host ;; *) echo "bench/coll-hier-ab.sh: unknown placement $PLACEMENT" >&2; exit 2 ;; esac
ZERO=${COLLHAB_ZERO:-0}
TUNING=()
[ "${COLLHAB_TCP_TUNING:-0}" = 1 ] && TUNING=(--tcp-tuning)
N=$((SITES * 4))
TB=$REL/gw-testbed
OUT=bench/out/coll-hier-ab
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/coll-hier-ab.sh: gw-testbed needs root" >&2; exit 0; fi
WORK=/var/tmp/gw-bench-collhab-$$
mkdir -p "$WORK"
ID=""
cleanup() {
    [ -n "$ID" ] && "$TB" down --id "$ID" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
GW_MPI_LIBDIR=$REL scripts/gwcc -O2 -o "$WORK/coll_lat_gw" bench/c/coll_lat.c
# One testbed with one-way delay $1 ms, the rounds labelled with suffix $2
# appended to $res; sets ONEWAY to the ping's one-way delay (ms). Not in a
# subshell: the EXIT trap must see ID to take the testbed down.
run_rounds() {
    local delay=$1 suffix=$2 env r v words sysctls h
    ID="ab$$$suffix"
    ID=${ID:0:12}
    env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID" --sites "$SITES" --hosts 2 --wan-delay "$delay" "${TUNING[@]}" --shared-fs 2>"$OUT/up.err") || {
        echo "bench/coll-hier-ab.sh: gw-testbed up failed: $(tail -3 "$OUT/up.err")" >&2; exit 1; }
    eval "$env"
    HOSTS=$(grep -E '^s[0-9]+h[0-9]+$' "$GW_TESTBED_HOSTFILE")
    for h in $HOSTS; do
        "$TB" exec --id "$ID" "$h" sysctl -qw net.ipv4.tcp_congestion_control=reno
    done
    sed -E 's/^(s[0-9]+h[0-9]+)$/\1:2/' "$GW_TESTBED_MACHINES" >"$WORK/machines"
    local oneway
    oneway=$("$TB" exec --id "$ID" s0h0 ping -c 5 -i 0.2 -q s1h0 2>/dev/null |
        awk -F/ '/^rtt|^round-trip/ { printf "%.2f", $5 / 2 }')
    echo "bench: coll-hier-ab: delay $delay ms, placement $PLACEMENT: one-way WAN delay by ping ${oneway:-n/a} ms; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    for r in $(seq 1 "$ROUNDS"); do
        for v in A B; do
            words=$A sysctls=${COLLHAB_A_SYSCTL:-}
            [ "$v" = B ] && words=$B sysctls=${COLLHAB_B_SYSCTL:-}
            for h in $HOSTS; do
                for kv in $sysctls; do
                    "$TB" exec --id "$ID" "$h" sysctl -qw "$kv"
                done
            done
            echo "bench: coll-hier-ab: delay $delay, round $r, variant $v ($words${sysctls:+; sysctl $sysctls}); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
            # shellcheck disable=SC2086
            "$TB" exec --id "$ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" GW_ENCRYPT=never GW_COLL=hier \
                GW_SPIN_US=0 ${COLLHAB_ENV:-} $words timeout -k 5 900 \
                "$REL/gwrun" -f "$WORK/machines" --map-by "$gwmap" -n "$N" --timeout 890 \
                "$WORK/coll_lat_gw" "$v$suffix:$r" "$ITERS" plain "$MAXB" >>"$res" 2>>"$OUT/err-$v.txt" ||
                echo "bench: coll-hier-ab: round $r $v failed: $(tail -2 "$OUT/err-$v.txt")" >&2
        done
    done
    "$TB" down --id "$ID" >/dev/null 2>&1 || true
    ID=""
    ONEWAY=${oneway:-0}
}
res=$WORK/res
: >"$res"
run_rounds "$DELAY" ""
oneway=$ONEWAY
[ "$ZERO" = 1 ] && run_rounds 0 0
cp "$res" "$OUT/runs.txt"
cat "$res"
echo "A: ${A:-(nothing)}; B: ${B:-(nothing)}; one-way delay ${oneway:-0} ms; $ROUNDS rounds of $ITERS calls; µs, median over the rounds of each round's median"
echo
python3 - "$res" "${oneway:-0}" <<'EOF'
import sys, statistics, collections
v = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 6 or f[0] != "coll":
        continue
    key = (f[1], f[2])
    if key not in order:
        order.append(key)
    v[key + ("0" if f[3] == "0" else "last", f[4].split(":")[0])].append(float(f[5]))
ow = float(sys.argv[2]) * 1000
med = lambda k: statistics.median(v[k]) if v.get(k) else None
fmt = lambda x: "" if x is None else f"{x:.1f}"
print("| op | bytes | A root 0 | A root last | B root 0 | B root last | A: last - 0, delays | B: last - 0, delays | B / A, root 0 | B / A, root last |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ratio = lambda a, b: f"{b / a:.2f}" if a and b else ""
for k in order:
    a0, al, b0, bl = (med(k + (r, x)) for x in "AB" for r in ("0", "last"))
    d = lambda x, y: "" if x is None or y is None or ow == 0 else f"{(y - x) / ow:.2f}"
    print(f"| {k[0]} | {k[1]} | {fmt(a0)} | {fmt(al)} | {fmt(b0)} | {fmt(bl)} | {d(a0, al)} | {d(b0, bl)} | {ratio(a0, b0)} | {ratio(al, bl)} |")
if any(x[3] in ("A0", "B0") for x in v) and ow > 0:
    print()
    print("Without WAN delay (same rounds), and what the WAN adds: (with delay - without) / one-way delay")
    print()
    print("| op | bytes | A0 root 0 | A0 root last | B0 root 0 | B0 root last | A adds, root 0 | A adds, root last | B adds, root 0 | B adds, root last |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in order:
        z = {(x, r): med(k + (r, x)) for x in ("A", "B", "A0", "B0") for r in ("0", "last")}
        add = lambda x, r: "" if z[(x, r)] is None or z[(x + "0", r)] is None else f"{(z[(x, r)] - z[(x + '0', r)]) / ow:.2f}"
        print(f"| {k[0]} | {k[1]} | {fmt(z[('A0', '0')])} | {fmt(z[('A0', 'last')])} | {fmt(z[('B0', '0')])} | {fmt(z[('B0', 'last')])} | {add('A', '0')} | {add('A', 'last')} | {add('B', '0')} | {add('B', 'last')} |")
EOF
