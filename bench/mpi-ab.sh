#!/usr/bin/env bash
# A/B check of the MPI small-message latency path: bench/mpi/pp.c (2 ranks,
# one host) against several builds of gridwire's libmpi.so, and against
# Debian's MPICH, the runs interleaved so that a noisy machine slows all
# alike. Not a test; prints "NAME one-way-µs" per run (best of pp's 3 reps).
#
#   bench/mpi-ab.sh DIR...     each DIR holds a libmpi.so (e.g. a copy of
#                              target/release/libmpi.so before and after a change)
# Env: ROUNDS (default 4), PP_N (round trips per rep, default 500000),
#      PP_SIZE (bytes, default 8), MPICH=0 to leave MPICH out,
#      GWRUN_ARGS (extra gwrun options, e.g. "--emulate-hosts 2" for tcp;
#      MPICH then stays on shared memory: set MPICH=0).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/mpi-ab.sh LIBDIR..." >&2; exit 2; }
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
W=$T/bench-mpi
mkdir -p "$W"
CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/pp_gw" bench/mpi/pp.c || exit 1
mpich=0
[ "${MPICH:-1}" = 1 ] && command -v mpicc.mpich >/dev/null &&
  mpicc.mpich -O2 -o "$W/pp_mpich" bench/mpi/pp.c && mpich=1
best() { sort -n | head -1; }
for _ in $(seq "${ROUNDS:-4}"); do
  for d in "$@"; do
    [ -f "$d/libmpi.so" ] || { echo "bench/mpi-ab.sh: no libmpi.so in $d" >&2; exit 2; }
    # LD_LIBRARY_PATH wins over the program's RUNPATH: this build is used.
    echo "$d $(LD_LIBRARY_PATH=$d "$T/release/gwrun" -n 2 --timeout 120 ${GWRUN_ARGS:-} "$W/pp_gw" "${PP_N:-500000}" "${PP_SIZE:-8}" | best)"
  done
  [ $mpich = 1 ] && echo "mpich $(MPIEXEC_TIMEOUT=120 mpiexec.mpich -n 2 "$W/pp_mpich" "${PP_N:-500000}" "${PP_SIZE:-8}" | best)"
done
