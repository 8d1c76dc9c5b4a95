#!/usr/bin/env bash
# At the open-file limit: the ranks of a running ping-pong (2 emulated hosts,
# tcp between them) run under a low `ulimit -n` (what they need plus a few),
# and peers keep connecting to their tcp listeners and holding the
# connections open until the job ends. The job must finish correctly; each
# rank must say clearly that it refuses connections at the open-file limit
# (once or a few times, not once per poll: a listener that spins on EMFILE
# logs thousands of lines and burns a core).
#   tests/reliability/fdlimit.sh [SECONDS]    (the ping-pong's run time, default 15)
. "$(dirname "$0")/lib.sh"
GW_TEST_NAME=tests/reliability/fdlimit.sh
seconds=${1:-15}
rel_build || exit $?

# What a rank needs: its open files in a normal run, measured.
"$gwrun" --timeout 120 -n 2 --emulate-hosts 2 "$pingpong" 5 1 >/dev/null 2>"$work/fdlimit-probe.err" &
gw=$!
pids=$(wait_ranks "$gw" 2) || { echo "FAIL: the probe job did not come up"; cat "$work/fdlimit-probe.err"; exit 1; }
sleep 0.5
need=0
for p in $pids; do
  n=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
  [ "$n" -gt "$need" ] && need=$n
done
kill "$gw" 2>/dev/null
wait "$gw" 2>/dev/null
limit=$((need + 6))

# stderr keeps its first 2000 lines and counts the rest: a spinning listener
# writes millions.
# (Through a fifo, so that the counter is not a child of gwrun, which ends
# its children when the job ends.)
rm -f "$work/fdlimit.err" "$work/fdlimit.err-lines" "$work/fdlimit.fifo"
mkfifo "$work/fdlimit.fifo"
awk -v f="$work/fdlimit.err" -v c="$work/fdlimit.err-lines" \
  'NR <= 2000 { print > f } END { print NR > c }' <"$work/fdlimit.fifo" &
counter=$!
(ulimit -n "$limit" && exec "$gwrun" --timeout $((seconds + 60)) -n 2 --emulate-hosts 2 "$pingpong" "$seconds" 1) \
  >"$work/fdlimit.out" 2>"$work/fdlimit.fifo" &
gw=$!
pids=$(wait_ranks "$gw" 2) || { echo "FAIL: the job did not come up under ulimit -n $limit"; cat "$work/fdlimit.err"; exit 1; }
# Let the ping-pong start (its own connection opened) before the limit is hit.
sleep 0.5
tcps=()
for p in $pids; do tcps+=($(tcp_ports "$p")); done
t0=$(date +%s)
# A listener spinning on EMFILE would show as system time too, but the
# ping-pong itself busy-polls: the count of log lines is the clear signal.
python3 "$root/tests/reliability/flood.py" --hold 60 --tcp "${tcps[@]}" --until-pid "$gw" >"$work/fdlimit.held" &
holder=$!
# A new gridwire peer at the limit (it knows the secret, so only the limit
# stands in its way): what it is told is reported.
sleep 1
for p in $pids; do [ "$(rank_of "$p")" = 0 ] && r0=$p; done
newpeer=$(GW_JOB_SECRET=$(job_secret "$r0") timeout 30 "$hostile" "$(tcp_ports "$r0" | head -1)" \
  --to 0 --as 1 --frames 0 2>&1 | tail -1)
wait "$holder"
held=$(cat "$work/fdlimit.held")
wait "$gw"
rc=$?
wait "$counter"
rm -f "$work/fdlimit.fifo"
touch "$work/fdlimit.err"
fail=0
out=$(cat "$work/fdlimit.out")
if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^pingpong ok'; then
  echo "FAIL: the job at the open-file limit failed (exit $rc):"; tail -20 "$work/fdlimit.err"; fail=1
fi
if grep -q panicked "$work/fdlimit.err"; then
  echo "FAIL: a rank panicked at the open-file limit:"; grep -m3 panicked "$work/fdlimit.err"; fail=1
fi
clear=$(grep -ciE 'open files|open-file|file descriptor|EMFILE|RLIMIT_NOFILE|ulimit' "$work/fdlimit.err")
lines=$(cat "$work/fdlimit.err-lines" 2>/dev/null || echo 0)
if [ "$clear" -eq 0 ]; then
  echo "FAIL: no rank said it is at the open-file limit (stderr: $lines lines)"; head -5 "$work/fdlimit.err"; fail=1
fi
if [ "$lines" -gt 200 ]; then
  echo "FAIL: $lines lines of stderr at the open-file limit (a listener spinning on EMFILE?):"
  sort "$work/fdlimit.err" | uniq -c | sort -rn | head -3; fail=1
fi
report "fdlimit ($profile, ulimit -n $limit for ranks needing $need, ping-pong for $seconds s): exit $rc, $(echo "$out" | grep '^pingpong' || echo 'no pingpong ok line'), one-way median $(echo "$out" | awk '$1 == "window" {print $3}' | median) us; held connections $held; a new authenticated peer was told: ${newpeer:-nothing}; stderr $lines lines, $clear naming the limit: $(grep -m1 -iE 'open files|open-file|file descriptor|EMFILE|ulimit' "$work/fdlimit.err")"
exit $fail
