#!/usr/bin/env bash
# A/B timing of the shm message rate (`osu rate`: bench/mpi/osu.c, 1/8/64 B,
# window of 64) for several builds of gridwire against MPICH and Open MPI,
# launched as bench/mpi.sh launches them on one host (pinned one rank per
# core), the runs interleaved so that a noisy machine slows all alike. Not a
# test; prints "NAME SIZE M-msg/s" per run, with the load average per run.
#
#   bench/rate-ab.sh DIR...    each DIR holds a libmpi.so and a gwrun (e.g.
#                              copies of target/release/ before and after a change)
# Env: RUNS (default 3), OSU_MS (default 60), MPICH=0 / OMPI=0 to leave a peer out.
# For figures that the machine's load does not move, see bench/rate-instr.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/rate-ab.sh DIR..." >&2; exit 2; }
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
W=$T/bench-rate-ab
mkdir -p "$W"
export OSU_MS=${OSU_MS:-60}
i=0
for d in "$@"; do
  [ -f "$d/libmpi.so" ] && [ -x "$d/gwrun" ] || { echo "bench/rate-ab.sh: $d needs libmpi.so and gwrun" >&2; exit 2; }
  GW_MPI_LIBDIR=$d scripts/gwcc -O2 -o "$W/osu_$i" bench/mpi/osu.c || exit 1
  i=$((i + 1))
done
mpich=0; ompi=0
[ "${MPICH:-1}" = 1 ] && command -v mpicc.mpich >/dev/null &&
  mpicc.mpich -O2 -Wno-stringop-overflow -o "$W/osu_mpich" bench/mpi/osu.c && mpich=1
[ "${OMPI:-1}" = 1 ] && command -v mpicc.openmpi >/dev/null &&
  mpicc.openmpi -O2 -o "$W/osu_ompi" bench/mpi/osu.c && ompi=1
load() { cut -d' ' -f1 /proc/loadavg; }
for r in $(seq "${RUNS:-3}"); do
  i=0
  for d in "$@"; do
    l=$(load)
    timeout 300 "$d/gwrun" -n 2 --bind-to core --timeout 300 "$W/osu_$i" rate | sed "s|^rate|$d|; s|\$| load $l|"
    i=$((i + 1))
  done
  [ $mpich = 1 ] && { l=$(load); timeout 300 mpiexec.mpich -bind-to core -n 2 "$W/osu_mpich" rate | sed "s|^rate|mpich|; s|\$| load $l|"; }
  [ $ompi = 1 ] && { l=$(load); timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to core -n 2 "$W/osu_ompi" rate | sed "s|^rate|ompi|; s|\$| load $l|"; }
done
