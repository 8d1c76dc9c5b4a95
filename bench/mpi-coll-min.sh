#!/usr/bin/env bash
# The 2-rank collectives on a loaded machine: bench/mpi/coll_min.c (the least
# over many short chunks of calls, see there) for gridwire, MPICH and Open
# MPI, placed as bench/mpi.sh places them (shm: one host, pinned one per
# core; tcp: two emulated hosts for gridwire, MPICH and Open MPI forced onto
# TCP), one MPI after the other at each size. Prints a Markdown table with
# gridwire's ratio to the better peer. Not a test; for iterating when the
# machine is shared (bench/mpi-coll.sh's medians need a quiet one).
#
#   bench/mpi-coll-min.sh shm|tcp ["a b t r g B"] ["0 8 512 4096 32768 262144 1048576"]
# Env: CARGO_TARGET_DIR, GW_BASE_LIB=DIR (another build's libmpi.so, run as
#      "base" beside the others: before/after in one run), CHUNKS (200),
#      CH_SMALL/CH_MID/CH_BIG (calls per chunk up to 4 KiB / 64 KiB / above:
#      100 / 20 / 4), NO_BUILD=1, NP (ranks, default 2; above the core count
#      the shm runs are not pinned, and tcp runs put NP/2 ranks on each of 2
#      emulated hosts).
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
W=$T/bench-mpi-coll-min
mkdir -p "$W"
m=${1:-shm}
whiches=${2:-a b t r g B}
sizes=${3:-0 8 512 4096 32768 262144 1048576}
if [ "${NO_BUILD:-0}" != 1 ]; then
  CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
  GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/cl_gw" bench/mpi/coll_min.c || exit 1
  [ -n "${GW_BASE_LIB:-}" ] && { GW_MPI_LIBDIR=$GW_BASE_LIB scripts/gwcc -O2 -o "$W/cl_base" bench/mpi/coll_min.c || exit 1; }
  mpicc.mpich -O2 -o "$W/cl_mpich" bench/mpi/coll_min.c || exit 1
  mpicc.openmpi -O2 -o "$W/cl_ompi" bench/mpi/coll_min.c || exit 1
fi
G=$T/release/gwrun
mpis="gw mpich ompi"
[ -n "${GW_BASE_LIB:-}" ] && mpis="base gw mpich ompi"
np=${NP:-2}
pin=core
[ "$np" -gt "$(nproc)" ] && pin=none
run() { # mpi args...
  local x=$1; shift
  case $x-$m in
    gw-shm | base-shm) "$G" -n "$np" --bind-to $pin --timeout 120 "$W/cl_$x" "$@" ;;
    gw-tcp | base-tcp) "$G" -n "$np" --emulate-hosts 2 --timeout 120 "$W/cl_$x" "$@" ;;
    mpich-shm) if [ "$pin" = core ]; then mpiexec.mpich -bind-to core -n "$np" "$W/cl_mpich" "$@"; else mpiexec.mpich -n "$np" "$W/cl_mpich" "$@"; fi ;;
    mpich-tcp) MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n "$np" "$W/cl_mpich" "$@" ;;
    ompi-shm) mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to $pin -n "$np" "$W/cl_ompi" "$@" ;;
    ompi-tcp) mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self -n "$np" "$W/cl_ompi" "$@" ;;
  esac 2>>"$W/err.txt"
}
echo "# bench/mpi-coll-min.sh $m, $np ranks, $(date -u '+%Y-%m-%d %H:%M UTC'), CHUNKS=${CHUNKS:-200}, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "| %s | size |" "$m"; for x in $mpis; do printf " %s µs |" "$x"; done
[ -n "${GW_BASE_LIB:-}" ] && printf " gw / better | base / better | gw / base |\n" || printf " gw / better |\n"
printf "| --- | ---: |"; for x in $mpis; do printf " ---: |"; done
[ -n "${GW_BASE_LIB:-}" ] && printf " ---: | ---: | ---: |\n" || printf " ---: |\n"
for w in $whiches; do
  for s in $sizes; do
    { [ "$w" = B ] && [ "$s" != 0 ]; } && continue
    { [ "$w" != B ] && [ "$s" = 0 ]; } && continue
    if [ "$s" -le 4096 ]; then ch=${CH_SMALL:-100}; elif [ "$s" -le 65536 ]; then ch=${CH_MID:-20}; else ch=${CH_BIG:-4}; fi
    declare -A v=()
    for x in $mpis; do v[$x]=$(timeout 150 bash -c "$(declare -f run); m=$m W=$W G=$G np=$np pin=$pin; run $x $ch ${CHUNKS:-200} $s $w" | tail -1); done
    printf "| %s | %s |" "$(case $w in a) echo allreduce ;; b) echo bcast ;; t) echo alltoall ;; r) echo reduce ;; g) echo allgather ;; B) echo barrier ;; esac)" "$s"
    for x in $mpis; do printf " %s |" "${v[$x]}"; done
    awk -v g="${v[gw]}" -v b="${v[base]:-}" -v a="${v[mpich]}" -v o="${v[ompi]}" 'BEGIN {
      best = (a != "" && (o == "" || a + 0 < o + 0)) ? a : o
      printf " %s |", (best > 0 && g != "") ? sprintf("%.2f", g / best) : "n/a"
      if (b != "") printf " %s | %s |", (best > 0) ? sprintf("%.2f", b / best) : "n/a", (b > 0 && g != "") ? sprintf("%.2f", g / b) : "n/a"
      printf "\n" }'
  done
done
