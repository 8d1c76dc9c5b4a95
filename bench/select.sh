#!/bin/sh
# Measured, size-aware selection (issue 13) against tcp only and udp only:
# latency (ping-pong, one way) and bandwidth (64 nonblocking sends in
# flight) at 8 B ... 4 MiB between two emulated hosts of this machine
# (tcp and udp over loopback), the three cases interleaved in every round
# of one job (bench/mpi/select_pp.c). Prints the medians per case and
# size as a Markdown table, the ratios against tcp, and gwrun --stats'
# account of what the measured selection chose. Not a test.
#
# Usage: bench/select.sh [REPS]        (default 5 rounds after a warm-up)
#        bench/select.sh --wan [REPS]  the same between two sites of a
#            gw-testbed whose WAN has SELECT_WAN_DELAY ms one-way delay
#            (default 2) and SELECT_WAN_LOSS % loss (default 1); needs root
#        SELECT_MAX_ITERS caps the round trips and streamed messages per
#            figure (default 2000; with --wan 200, which keeps a run of
#            5 rounds near 20 minutes instead of 1.5 hours)
# Env:   CARGO_TARGET_DIR (default target)
set -eu
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
WAN=0
if [ "${1:-}" = --wan ]; then WAN=1; shift; fi
REPS=${1:-5}
if [ "$WAN" = 1 ]; then MAXIT=${SELECT_MAX_ITERS:-200}; else MAXIT=${SELECT_MAX_ITERS:-2000}; fi
cargo build -q --release -p gridwire-capi -p gridwire-launch
OUT=$(mktemp -d /var/tmp/gw-select-XXXXXX)
chmod 755 "$OUT"
TB=""
cleanup() {
    if [ -n "$TB" ] && [ -n "${GW_TESTBED_ID:-}" ]; then "$TB" down --id "$GW_TESTBED_ID" >/dev/null 2>&1 || true; fi
    rm -rf "$OUT"
}
trap cleanup EXIT
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$OUT/pp" bench/mpi/select_pp.c
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$WAN" = 1 ]; then
    if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/select.sh --wan: gw-testbed needs root" >&2; exit 0; fi
    cargo build -q --release -p gridwire-linkemu -p gridwire-testbed
    TB=$T/release/gw-testbed
    DELAY=${SELECT_WAN_DELAY:-2}
    LOSS=${SELECT_WAN_LOSS:-1}
    eval "$(GW_LINKEMU=$T/release/gw-linkemu "$TB" up --sites 2 --hosts 1 --shared-fs \
        --wan-delay "$DELAY" --wan-loss "$LOSS")"
    echo "between two sites of gw-testbed: WAN one-way delay $DELAY ms, loss $LOSS %"
    "$TB" exec --id "$GW_TESTBED_ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" \
        timeout 3000 "$T/release/gwrun" -f "$GW_TESTBED_MACHINES" -n 2 --map-by host \
        --timeout 2900 --stats "$OUT/pp" "$REPS" "$MAXIT" >"$OUT/runs" 2>"$OUT/stats"
else
    echo "between two emulated hosts of this machine (loopback)"
    "$T/release/gwrun" --timeout 1200 --stats -n 2 --emulate-hosts 2 "$OUT/pp" "$REPS" "$MAXIT" \
        >"$OUT/runs" 2>"$OUT/stats"
fi
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Medians of $REPS rounds (latency: one way, us; bandwidth: MB/s; ratio: against tcp of the same rounds):"
echo
echo "| size | tcp lat | udp lat | measured lat | measured/tcp lat | tcp bw | udp bw | measured bw | measured/tcp bw |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
awk '
function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (n == 0) return 0
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ lat[$1, $2] = lat[$1, $2] " " $3; bw[$1, $2] = bw[$1, $2] " " $4; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
END {
    for (k = 1; k <= ns; k++) {
        s = order[k]
        lt = med(lat["tcp", s]); lu = med(lat["udp", s]); lm = med(lat["measured", s])
        bt = med(bw["tcp", s]); bu = med(bw["udp", s]); bm = med(bw["measured", s])
        printf "| %s | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.2f |\n", s, lt, lu, lm, (lt > 0 ? lm / lt : 0), bt, bu, bm, (bt > 0 ? bm / bt : 0)
    }
}' "$OUT/runs"
echo
echo "What the measured selection chose (gwrun --stats):"
echo
grep -E 'size-aware|several at once' "$OUT/stats" | sed 's/^/    /'
