#!/bin/sh
# udp vs tcp: small-message latency and large-message bandwidth on loopback
# and over an emulated link between two network namespaces (gw-linkemu),
# clean and with 10 ms delay plus 1% / 5% loss. Not a test: prints a
# Markdown table to paste into docs/udp.md.
#
# Usage: bench/udp.sh            (namespace parts need root and `ip`)
# Env:   CARGO_TARGET_DIR (default target), ITERS_LAT, BW_MB, LOSSY_MB, REPS
#        (each figure is the median of REPS runs, udp and tcp interleaved;
#        every run is listed after the table), ROWS=lossy (only the two
#        lossy emulated-link rows)
set -eu
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
ITERS_LAT=${ITERS_LAT:-20000}
BW_MB=${BW_MB:-1000}
LOSSY_MB=${LOSSY_MB:-24}
REPS=${REPS:-5}
cargo build -q --release -p gridwire-core --examples
cargo build -q --release -p gridwire-launch -p gridwire-linkemu
GWRUN=$T/release/gwrun
PROG=$T/release/examples/udp_check
EMU=$T/release/gw-linkemu

# run METHOD WRAPPER ARGS... -> the result line of rank 0
run() {
    m=$1; shift; wrap=$1; shift
    if [ -z "$wrap" ]; then
        GW_METHODS=$m "$GWRUN" --timeout 300 -n 2 "$PROG" "$@"
    else
        GW_METHODS=$m "$GWRUN" --timeout 300 -n 2 sh -c "$wrap $PROG $*"
    fi | grep -E '^(LATENCY|BANDWIDTH)' | head -1
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

# med V...: the median of the values (the mean of the middle two for an even count)
med() {
    echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

RUNS=""
row() { # label wrapper bw_mb [latency iterations]
    label=$1; wrap=$2; mb=$3; it=${4:-$ITERS_LAT}
    lu=""; lt=""; bu=""; bt=""
    # Interleaved (udp, tcp, udp, tcp, ...) so both see the same machine.
    i=0
    while [ $i -lt "$REPS" ]; do
        lu="$lu $(run udp "$wrap" pingpong 8 "$it" | field half_rtt_us)"
        lt="$lt $(run tcp "$wrap" pingpong 8 "$it" | field half_rtt_us)"
        i=$((i + 1))
    done
    i=0
    while [ $i -lt "$REPS" ]; do
        bu="$bu $(run udp "$wrap" bandwidth 1048576 "$mb" | field MB_s)"
        bt="$bt $(run tcp "$wrap" bandwidth 1048576 "$mb" | field MB_s)"
        i=$((i + 1))
    done
    echo "| $label | $(med $lu) | $(med $lt) | $(med $bu) | $(med $bt) |"
    RUNS="$RUNS
| $label |$lu |$lt |$bu |$bt |"
}

runs() {
    echo
    echo "Each run, in order (udp and tcp interleaved):"
    echo
    echo "| link | udp latency | tcp latency | udp bandwidth | tcp bandwidth |"
    echo "| --- | --- | --- | --- | --- |"
    echo "$RUNS" | grep .
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -srm), $(nproc) cpus, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Medians of $REPS interleaved runs:"
echo
echo "| link | udp latency (us, half RTT, 8 B) | tcp latency | udp bandwidth (MB/s, 1 MiB msgs) | tcp bandwidth |"
echo "| --- | --- | --- | --- | --- |"
ROWS=${ROWS:-all}
if [ "$ROWS" = all ]; then
    row "loopback" "" "$BW_MB"
    row "loopback, GW_UDP_DGRAM=65000" "env GW_UDP_DGRAM=65000" "$BW_MB"
fi

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo
    echo "(namespace link skipped: needs root and ip)"
    runs
    exit 0
fi
A=gwbench$$a; B=gwbench$$b
EMU_PID=
cleanup() {
    [ -n "$EMU_PID" ] && kill "$EMU_PID" 2>/dev/null && wait "$EMU_PID" 2>/dev/null || true
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
}
trap cleanup EXIT INT TERM
WRAP="if [ \$PMI_RANK = 0 ]; then N=$A; X=10.80.0.1; else N=$B; X=10.80.0.2; fi; exec ip netns exec \$N env GW_UDP_ADDR=\$X GW_TCP_ADDR=\$X GW_UDP_DGRAM=1472"

emu() { # extra emulator args...
    cleanup
    EMU_PID=
    mkfifo /tmp/gwbench$$.fifo
    "$EMU" --ns-a $A --ns-b $B --create-ns --addr-a 10.80.0.1/24 --addr-b 10.80.0.2/24 --queue 100ms "$@" >/tmp/gwbench$$.fifo 2>/dev/null &
    EMU_PID=$!
    head -c 5 /tmp/gwbench$$.fifo >/dev/null
    rm -f /tmp/gwbench$$.fifo
}

if [ "$ROWS" = all ]; then
    emu
    row "namespaces, gw-linkemu, no impairment" "$WRAP" 200 5000
fi
emu --delay 10ms --loss 1 --rate 1gbit
row "gw-linkemu 10 ms delay, 1% loss" "$WRAP" "$LOSSY_MB" 100
emu --delay 10ms --loss 5 --rate 1gbit
row "gw-linkemu 10 ms delay, 5% loss" "$WRAP" "$LOSSY_MB" 100
runs
