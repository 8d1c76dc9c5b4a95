#!/usr/bin/env bash
# 10 000 unauthenticated tcp connections and 10 000 udp datagrams at the
# published ports of both ranks of a running MPI ping-pong on 2 emulated
# hosts (so the ranks talk over tcp), loopback only. The ping-pong
# (tests/reliability/pingpong.c) runs for a set time and reports its one-way
# latency per 1 s window; the flood starts after a few quiet windows and
# stops once it has sent its share, so the same job has quiet windows before
# and after it. The job must finish correctly (every message checked), and
# the flood must have been sent while it ran.
#   tests/reliability/flood.sh [SECONDS]    (default 60)
. "$(dirname "$0")/lib.sh"
GW_TEST_NAME=tests/reliability/flood.sh
seconds=${1:-60}
rel_build || exit $?
fail=0

"$gwrun" --timeout $((seconds + 120)) -n 2 --emulate-hosts 2 "$pingpong" "$seconds" 1 \
  >"$work/flood.out" 2>"$work/flood.err" &
gw=$!
pids=$(wait_ranks "$gw" 2) || { echo "FAIL: the job's ranks did not come up"; cat "$work/flood.err"; exit 1; }
tcps=() udps=()
for p in $pids; do
  tcps+=($(tcp_ports "$p"))
  udps+=($(udp_ports "$p"))
done
sleep 4
f0=$(date +%s.%N)
flood=$(python3 "$root/tests/reliability/flood.py" --tcp "${tcps[@]}" --udp "${udps[@]}" \
  --connections 10000 --datagrams 10000)
f1=$(date +%s.%N)
wait "$gw"
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^pingpong ok' "$work/flood.out"; then
  echo "FAIL: the job under the flood failed (exit $rc):"; tail -20 "$work/flood.err"; fail=1
fi
if grep -q panicked "$work/flood.err"; then
  echo "FAIL: a rank panicked under the flood:"; grep -m3 panicked "$work/flood.err"; fail=1
fi
# A window ending before the flood began (+1 s: it spans a second) or
# starting after it ended is quiet; one wholly inside it is flooded.
quiet=$(awk -v a="$f0" -v b="$f1" '$1 == "window" && ($2 <= a || $2 - 1 >= b) {print $3}' "$work/flood.out" | median)
loaded=$(awk -v a="$f0" -v b="$f1" '$1 == "window" && $2 - 1 >= a && $2 <= b {print $3}' "$work/flood.out" | median)
nq=$(awk -v a="$f0" -v b="$f1" '$1 == "window" && ($2 <= a || $2 - 1 >= b)' "$work/flood.out" | wc -l)
nl=$(awk -v a="$f0" -v b="$f1" '$1 == "window" && $2 - 1 >= a && $2 <= b' "$work/flood.out" | wc -l)
end=$(awk '$1 == "window" {t = $2} END {print t}' "$work/flood.out")
if [ "$nl" -eq 0 ] || awk -v e="$end" -v b="$f1" 'BEGIN {exit !(e < b)}'; then
  echo "FAIL: the flood was not sent while the job ran ($nl flooded windows; job's last window $end, flood ended $f1): raise SECONDS ($seconds)"; fail=1
fi
lines=$(grep -c . "$work/flood.err")
report "flood ($profile, ping-pong of 8 B over tcp between 2 emulated hosts for $seconds s; ${#tcps[@]} tcp + ${#udps[@]} udp ports): one-way median quiet ${quiet:-?} us ($nq windows), flooded ${loaded:-?} us ($nl windows); flood $flood; the job wrote $lines stderr lines; exit $rc"
exit $fail
