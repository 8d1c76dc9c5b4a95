#!/usr/bin/env bash
# 10 000 unauthenticated tcp connections and 10 000 udp datagrams (at least:
# the flood lasts as long as the job; fewer before it ended is a failure) at the published ports of both ranks
# of a running MPI ping-pong on 2 emulated hosts (so the ranks talk over
# tcp), loopback only. The job must finish correctly; its one-way latency is
# reported beside a quiet run of the same job.
#   tests/reliability/flood.sh [ITERATIONS]    (default 200000 per repetition)
. "$(dirname "$0")/lib.sh"
GW_TEST_NAME=tests/reliability/flood.sh
iters=${1:-200000}
rel_build || exit $?
run_pp() { timeout 300 "$gwrun" --timeout 240 -n 2 --emulate-hosts 2 "$pp" "$iters" 8; }

quiet=$(run_pp 2>"$work/flood-quiet.err") || { echo "FAIL: the quiet run failed"; cat "$work/flood-quiet.err"; exit 1; }
q=$(echo "$quiet" | median)

"$gwrun" --timeout 240 -n 2 --emulate-hosts 2 "$pp" "$iters" 8 >"$work/flood-loaded.out" 2>"$work/flood-loaded.err" &
gw=$!
pids=$(wait_ranks "$gw" 2) || { echo "FAIL: the job's ranks did not come up"; cat "$work/flood-loaded.err"; exit 1; }
tcps=() udps=()
for p in $pids; do
  tcps+=($(tcp_ports "$p"))
  udps+=($(udp_ports "$p"))
done
flood=$(python3 "$root/tests/reliability/flood.py" --tcp "${tcps[@]}" --udp "${udps[@]}" \
  --connections 10000 --datagrams 10000 --until-pid "$gw")
wait "$gw"
rc=$?
loaded=$(cat "$work/flood-loaded.out")
l=$(echo "$loaded" | median)
fail=0
if [ $rc -ne 0 ] || [ "$(echo "$loaded" | grep -c .)" -ne 3 ]; then
  echo "FAIL: the job under the flood failed (exit $rc):"; tail -20 "$work/flood-loaded.err"; fail=1
fi
if grep -q "panicked" "$work/flood-loaded.err"; then
  echo "FAIL: a rank panicked under the flood:"; grep -m3 panicked "$work/flood-loaded.err"; fail=1
fi
conns=$(echo "$flood" | python3 -c 'import json,sys; print(json.load(sys.stdin)["connections"])')
dgrams=$(echo "$flood" | python3 -c 'import json,sys; print(json.load(sys.stdin)["datagrams"])')
if [ "$conns" -lt 10000 ] || [ "$dgrams" -lt 10000 ]; then
  echo "FAIL: the job ended after $conns connections and $dgrams datagrams, before 10000 of each: raise ITERATIONS ($iters)"; fail=1
fi
msgs=$(grep -c . "$work/flood-loaded.err")
report "flood ($profile, $iters x3 ping-pongs of 8 B, tcp between 2 emulated hosts; ${#tcps[@]} tcp + ${#udps[@]} udp ports): one-way quiet $q us, flooded $l us (reps: $(echo $quiet) | $(echo $loaded)); flood $flood; the job wrote $msgs stderr lines; exit $rc"
exit $fail
