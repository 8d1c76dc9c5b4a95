#!/usr/bin/env bash
# A peer that sends garbage after authenticating: during a ping-pong on 2
# emulated hosts (tcp between the ranks), hostile_peer (crates/core/examples)
# reads the job secret from rank 0's environment, passes the handshake of
# rank 0's tcp listener as rank 1, then sends random frames. In a second job it
# claims a rank that is not in the job: that handshake must be refused (rank 0
# says so) and the job go on. The receiver must fail the garbage link
# with a clear error naming the peer and never crash: no panic, no rank dead
# by a signal, the job over within its timeout (it may abort, since a link to
# rank 1 failed, or go on; both are reported).
# The ping-pong (tests/reliability/pingpong.c) runs for SECONDS; a job still
# there 60 s later is a hang.
#   tests/reliability/hostile-peer.sh [SECONDS]   (default 10)
. "$(dirname "$0")/lib.sh"
GW_TEST_NAME=tests/reliability/hostile-peer.sh
seconds=${1:-10}
rel_build || exit $?
fail=0

one() { # $1: the rank hostile_peer claims to be; $2: a label; $3: auth|refused
  local as=$1 label=$2 expect=$3 gw pids r0 p port secret hp rc err t0 secs
  err=$work/hostile-$label.err
  t0=$(date +%s)
  # gwrun's own --timeout bounds the job (its pid must be the ranks' parent).
  : >"$err"
  "$gwrun" --timeout $((seconds + 60)) -n 2 --emulate-hosts 2 "$pingpong" "$seconds" 1 >"$work/hostile-$label.out" 2>>"$err" &
  gw=$!
  pids=$(wait_ranks "$gw" 2) || { echo "FAIL ($label): the job did not come up"; cat "$err"; fail=1; return; }
  for p in $pids; do [ "$(rank_of "$p")" = 0 ] && r0=$p; done
  port=$(tcp_ports "$r0" | head -1)
  secret=$(job_secret "$r0")
  [ -n "$secret" ] || { echo "FAIL ($label): no GW_JOB_SECRET in rank 0's environment"; fail=1; kill "$gw"; wait "$gw"; return; }
  sleep 0.3
  hp=$(GW_JOB_SECRET=$secret "$hostile" "$port" --to 0 --as "$as" --frames 2000 --seed 19 2>&1)
  local hprc=$?
  wait "$gw"
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  if [ "$expect" = auth ] && [ $hprc -ne 0 ]; then
    echo "FAIL ($label): hostile_peer did not authenticate: $hp"; fail=1
  fi
  if [ "$expect" = refused ]; then
    if [ $hprc -eq 0 ]; then
      echo "FAIL ($label): a peer claiming rank $as of a 2-rank job was let in: $hp"; fail=1
    elif ! grep -q "claims rank $as, but the job has 2 ranks" "$err"; then
      echo "FAIL ($label): rank 0 did not say why it refused rank $as:"; tail -5 "$err"; fail=1
    fi
  fi
  if grep -q panicked "$err"; then
    echo "FAIL ($label): a rank panicked:"; grep -m3 -A2 panicked "$err"; fail=1
  fi
  if grep -qiE 'killed by signal|signal (6|7|11)|SIGSEGV|SIGABRT|SIGBUS|core dumped' "$err"; then
    echo "FAIL ($label): a rank died by a signal:"; grep -m3 -iE 'signal|core' "$err"; fail=1
  fi
  if [ "$secs" -ge $((seconds + 60)) ] || grep -qi 'timed out' "$err"; then
    echo "FAIL ($label): the job hung until gwrun's $((seconds + 60)) s timeout"; fail=1
  fi
  local said
  said=$(grep -m1 -iE "rank $as|context $as|peer|frame|link" "$err" || true)
  if [ $rc -ne 0 ] && [ -z "$said" ]; then
    echo "FAIL ($label): the job failed without a clear error naming the peer:"; tail -5 "$err"; fail=1
  fi
  report "hostile peer ($profile, authenticated to rank 0 as context $as, 2000 random frames): $(echo "$hp" | tail -1 | sed 's/^hostile_peer: //'); job exit $rc after $secs s ($(grep -c '^window' "$work/hostile-$label.out") latency windows; $(grep '^pingpong' "$work/hostile-$label.out" || echo 'no pingpong ok line')); rank 0 said: ${said:-nothing}"
}

one 1 as-rank1 auth
one 9 as-stranger refused
exit $fail
