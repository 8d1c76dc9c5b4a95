# Sourced by the network-side reliability checks (tests/reliability/*.sh,
# `make reliability-net`). Builds what they need and finds a running job's
# ranks, ports and secret. Loopback only: every address is a rank's own
# listener on 127.0.0.1.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
. "$root/scripts/test-lib.sh"
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
# Debug by default (what `make test` builds); RELIABILITY_PROFILE=release for
# latency figures comparable to docs/benchmarks.md.
profile=${RELIABILITY_PROFILE:-debug}
bindir=$target/$profile
work=$target/reliability
mkdir -p "$work"
gwrun=$bindir/gwrun
pingpong=$work/pingpong-$profile
hostile=$bindir/examples/hostile_peer

rel_build() {
  local rel=()
  [ "$profile" = release ] && rel=(--release)
  cargo build -q "${rel[@]}" -p gridwire-capi -p gridwire-launch || return 1
  cargo build -q "${rel[@]}" -p gridwire-core --example hostile_peer || return 1
  if [ ! -x "$pingpong" ] || [ "$root/tests/reliability/pingpong.c" -nt "$pingpong" ] || [ "$bindir/libmpi.so" -nt "$pingpong" ]; then
    GW_MPI_LIBDIR=$bindir "$root/scripts/gwcc" -O2 -Wall -o "$pingpong" "$root/tests/reliability/pingpong.c" || return 1
  fi
  for tool in ss python3; do
    command -v "$tool" >/dev/null || { skip_or_fail "$tool not installed (Debian: iproute2, python3)"; return $?; }
  done
}

# The rank processes of the gwrun with pid $1: its children with a PMI_RANK
# (a shell's process substitution can be a child of the same pid).
rank_pids() {
  local p
  for p in $(pgrep -P "$1" 2>/dev/null); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^PMI_RANK=' && echo "$p"
  done
}

# Waits until gwrun $1 has $2 ranks that listen on tcp; prints their pids.
wait_ranks() {
  local gw=$1 n=$2 i pids p ok
  for i in $(seq 1 200); do
    pids=$(rank_pids "$gw")
    if [ "$(echo "$pids" | grep -c .)" -ge "$n" ]; then
      ok=1
      for p in $pids; do [ -n "$(tcp_ports "$p")" ] || ok=0; done
      [ $ok = 1 ] && { echo "$pids"; return 0; }
    fi
    kill -0 "$gw" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# Listening tcp / udp addresses (ip:port) of process $1.
tcp_ports() { ss -H -ltnp 2>/dev/null | grep "pid=$1," | awk '{print $4}'; }
udp_ports() { ss -H -lunp 2>/dev/null | grep "pid=$1," | awk '{print $4}'; }

# The job secret from the environment of rank process $1.
job_secret() { tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^GW_JOB_SECRET=//p'; }

# The gridwire rank of process $1 (PMI_RANK or GW_RANK from its environment).
rank_of() { tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^\(PMI_RANK\|GW_RANK\)=//p' | head -1; }

# Median of the numbers on stdin.
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }

# One line of results, also appended to target/reliability/results.txt.
report() { echo "$*"; echo "$(date -u +%FT%TZ) $*" >>"$work/results.txt"; }
