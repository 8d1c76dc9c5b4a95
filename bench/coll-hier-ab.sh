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
ID="ab$$"
ID=${ID:0:12}
env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID" --sites "$SITES" --hosts 2 --wan-delay "$DELAY" "${TUNING[@]}" --shared-fs 2>"$OUT/up.err") || {
    echo "bench/coll-hier-ab.sh: gw-testbed up failed: $(tail -3 "$OUT/up.err")" >&2; exit 1; }
eval "$env"
for h in $(grep -E '^s[0-9]+h[0-9]+$' "$GW_TESTBED_HOSTFILE"); do
    "$TB" exec --id "$ID" "$h" sysctl -qw net.ipv4.tcp_congestion_control=reno
done
sed -E 's/^(s[0-9]+h[0-9]+)$/\1:2/' "$GW_TESTBED_MACHINES" >"$WORK/machines"
oneway=$("$TB" exec --id "$ID" s0h0 ping -c 5 -i 0.2 -q s1h0 2>/dev/null |
    awk -F/ '/^rtt|^round-trip/ { printf "%.2f", $5 / 2 }')
echo "bench: coll-hier-ab: one-way WAN delay by ping ${oneway:-n/a} ms; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
res=$WORK/res
: >"$res"
for r in $(seq 1 "$ROUNDS"); do
    for v in A B; do
        words=$A
        [ "$v" = B ] && words=$B
        echo "bench: coll-hier-ab: round $r, variant $v ($words); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        # shellcheck disable=SC2086
        "$TB" exec --id "$ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" GW_ENCRYPT=never GW_COLL=hier \
            GW_SPIN_US=0 ${COLLHAB_ENV:-} $words timeout -k 5 900 \
            "$REL/gwrun" -f "$WORK/machines" -n "$N" --timeout 890 \
            "$WORK/coll_lat_gw" "$v:$r" "$ITERS" plain "$MAXB" >>"$res" 2>>"$OUT/err-$v.txt" ||
            echo "bench: coll-hier-ab: round $r $v failed: $(tail -2 "$OUT/err-$v.txt")" >&2
    done
done
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
print("| op | bytes | A root 0 | A root last | B root 0 | B root last | A: last - 0, delays | B: last - 0, delays | B / A, root last |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for k in order:
    a0, al, b0, bl = (med(k + (r, x)) for x in "AB" for r in ("0", "last"))
    d = lambda x, y: "" if x is None or y is None or ow == 0 else f"{(y - x) / ow:.2f}"
    ratio = f"{bl / al:.2f}" if al and bl else ""
    print(f"| {k[0]} | {k[1]} | {fmt(a0)} | {fmt(al)} | {fmt(b0)} | {fmt(bl)} | {d(a0, al)} | {d(b0, bl)} | {ratio} |")
EOF
