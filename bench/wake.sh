#!/usr/bin/env bash
# Wake-up latency of a receiver asleep in MPI_Recv (bench/mpi/wake.c): gridwire
# with the shm doorbell (default) and without (GW_SHM_DOORBELL=0), and MPICH,
# runs alternating. Not a test: prints a Markdown table for docs/benchmarks.md.
#   bench/wake.sh          (run by `make bench` via bench/run.sh)
# Env: RUNS (default 3), ROUNDS (default 21), IDLE_MS (default 30), CARGO_TARGET_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-3} ROUNDS=${ROUNDS:-21} IDLE_MS=${IDLE_MS:-30}
W=$T/bench-wake
mkdir -p "$W"
CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/wake_gw" bench/mpi/wake.c || exit 1
have_mpich=0
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$W/wake_mpich" bench/mpi/wake.c && have_mpich=1
row() { # label command... -> "| label | median | p90 |"
  local label=$1; shift
  local out
  out=$(timeout 120 "$@" "$ROUNDS" "$IDLE_MS" 2>/dev/null | grep '^wake median')
  echo "| $label | $(awk '{print $3}' <<<"$out") | $(awk '{print $6}' <<<"$out") |"
}
echo "### Wake-up of a sleeping receiver, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "Command: \`bench/wake.sh\` (RUNS=$RUNS, ROUNDS=$ROUNDS, IDLE_MS=$IDLE_MS); load average before: $(cut -d' ' -f1-3 /proc/loadavg). Microseconds from send to arrival after $IDLE_MS ms of idleness."
echo
echo "| run | median µs | p90 µs |"
echo "|---|---|---|"
for r in $(seq "$RUNS"); do
  row "gridwire (doorbell) #$r" "$T/release/gwrun" -n 2 "$W/wake_gw"
  row "gridwire GW_SHM_DOORBELL=0 #$r" env GW_SHM_DOORBELL=0 "$T/release/gwrun" -n 2 "$W/wake_gw"
  [ $have_mpich = 1 ] && row "MPICH #$r" mpiexec.mpich -n 2 "$W/wake_mpich"
done
exit 0
