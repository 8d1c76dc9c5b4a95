#!/bin/sh
# udp vs tcp: small-message latency and large-message bandwidth on loopback
# and over an emulated link between two network namespaces (gw-linkemu),
# clean and with 10 ms delay plus 1% / 5% loss. Not a test: prints a
# Markdown table to paste into docs/udp.md.
#
# Usage: bench/udp.sh            (namespace parts need root and `ip`)
# Env:   CARGO_TARGET_DIR (default target), ITERS_LAT, BW_MB, LOSSY_MB, REPS
#        (each figure is the best of REPS runs: min latency, max bandwidth)
set -eu
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
ITERS_LAT=${ITERS_LAT:-20000}
BW_MB=${BW_MB:-1000}
LOSSY_MB=${LOSSY_MB:-24}
REPS=${REPS:-3}
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

# best METHOD WRAPPER KEY min|max ARGS...: best of $REPS runs (the machine
# may be shared: the best run is the least disturbed one)
best() {
    m=$1; shift; wrap=$1; shift; key=$1; shift; how=$1; shift
    i=0; out=""
    while [ $i -lt "$REPS" ]; do
        v=$(run "$m" "$wrap" "$@" | field "$key")
        [ -n "$v" ] && out="$out $v"
        i=$((i + 1))
    done
    if [ "$how" = min ]; then
        echo $out | tr ' ' '\n' | sort -g | head -1
    else
        echo $out | tr ' ' '\n' | sort -g | tail -1
    fi
}

row() { # label wrapper bw_mb [latency iterations]
    label=$1; wrap=$2; mb=$3; it=${4:-$ITERS_LAT}
    lu=$(best udp "$wrap" half_rtt_us min pingpong 8 "$it")
    lt=$(best tcp "$wrap" half_rtt_us min pingpong 8 "$it")
    bu=$(best udp "$wrap" MB_s max bandwidth 1048576 "$mb")
    bt=$(best tcp "$wrap" MB_s max bandwidth 1048576 "$mb")
    echo "| $label | $lu | $lt | $bu | $bt |"
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -srm), $(nproc) cpus, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| link | udp latency (us, half RTT, 8 B) | tcp latency | udp bandwidth (MB/s, 1 MiB msgs) | tcp bandwidth |"
echo "| --- | --- | --- | --- | --- |"
row "loopback" "" "$BW_MB"
row "loopback, GW_UDP_DGRAM=65000" "env GW_UDP_DGRAM=65000" "$BW_MB"

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo
    echo "(namespace link skipped: needs root and ip)"
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

emu
row "namespaces, gw-linkemu, no impairment" "$WRAP" 200 5000
emu --delay 10ms --loss 1 --rate 1gbit
row "gw-linkemu 10 ms delay, 1% loss" "$WRAP" "$LOSSY_MB" 100
emu --delay 10ms --loss 5 --rate 1gbit
row "gw-linkemu 10 ms delay, 5% loss" "$WRAP" "$LOSSY_MB" 100
