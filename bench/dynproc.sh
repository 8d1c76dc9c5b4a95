#!/usr/bin/env bash
# Dynamic processes timed: bench/mpi/dynproc.c built against gridwire (gwcc),
# Debian's MPICH and Debian's Open MPI, in this one invocation:
#   spawn4   -- one parent: MPI_Comm_spawn of 4 processes + a barrier over
#               the intercommunicator + MPI_Comm_disconnect (ms per round);
#   connect  -- two ranks of one job: open a port, accept/connect, a barrier
#               over the intercommunicator, disconnect (ms per round);
#   jobs     -- two separately started one-rank jobs (two launcher
#               invocations; the port goes through a file): accept/connect,
#               a barrier, disconnect (ms per round, at the connecting job).
# Not a test: prints a Markdown table (for docs/benchmarks.md); a peer that
# cannot do an operation (Debian's MPICH 4.0.2 is built ch4:ucx, which has no
# dynamic processes) is reported as "fails".
#
#   bench/dynproc.sh        Env: RUNS (default 3 invocations, medians),
#                           ITERS (rounds per invocation, default 5), CARGO_TARGET_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-3}
ITERS=${ITERS:-5}
W=$T/bench-dynproc
mkdir -p "$W"
export MPIEXEC_TIMEOUT=120

CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GWRUN=$T/release/gwrun
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/dp_gw" bench/mpi/dynproc.c || exit 1
have_mpich=0; have_ompi=0
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$W/dp_mpich" bench/mpi/dynproc.c && have_mpich=1
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$W/dp_ompi" bench/mpi/dynproc.c && have_ompi=1

launch() { # impl n args...
  local i=$1 n=$2; shift 2
  case $i in
    gridwire) timeout 60 "$GWRUN" --timeout 50 -n "$n" "$W/dp_gw" "$@" ;;
    mpich) timeout 60 mpiexec.mpich -n "$n" "$W/dp_mpich" "$@" ;;
    openmpi) timeout 60 mpirun.openmpi --allow-run-as-root --oversubscribe -n "$n" "$W/dp_ompi" "$@" ;;
  esac
}
run() { # impl op -> "op MEDIAN MIN" or nothing
  local n=1; [ "$2" = connect ] && n=2
  if [ "$2" = jobs ]; then
    local f=$W/port-$1.txt
    rm -f "$f"
    launch "$1" 1 jobs-accept "$ITERS" "$f" >/dev/null 2>>"$W/$1-jobs.err" &
    local acc=$!
    launch "$1" 1 jobs-connect "$ITERS" "$f" 2>>"$W/$1-jobs.err" | grep -E "^jobs [0-9.]+ [0-9.]+$"
    kill "$acc" 2>/dev/null; wait "$acc" 2>/dev/null
    return
  fi
  case $1 in
    gridwire) timeout 100 "$GWRUN" --timeout 90 -n $n "$W/dp_gw" "$2" "$ITERS" ;;
    mpich) timeout 100 mpiexec.mpich -n $n "$W/dp_mpich" "$2" "$ITERS" ;;
    openmpi) timeout 100 mpirun.openmpi --allow-run-as-root --oversubscribe -n $n "$W/dp_ompi" "$2" "$ITERS" ;;
  esac 2>>"$W/$1-$2.err" | grep -E "^(spawn4|connect|jobs) [0-9.]+ [0-9.]+$"
}
impls="gridwire"
[ $have_mpich = 1 ] && impls="$impls mpich"
[ $have_ompi = 1 ] && impls="$impls openmpi"
raw=$W/raw.txt
: >"$raw"
load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u '+%Y-%m-%d %H:%M UTC')
for r in $(seq "$RUNS"); do
  for op in spawn4 connect jobs; do
    for i in $impls; do
      arg=$op; [ $op = spawn4 ] && arg=spawn
      out=$(run "$i" "$arg")
      if [ -n "$out" ]; then echo "$i $out" >>"$raw"; else echo "$i $op fails" >>"$raw"; fi
    done
  done
done
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
echo "Dynamic processes, $start, load $load, $RUNS runs x $ITERS rounds (median of the runs' medians; ms):"
echo
echo "| operation | gridwire | MPICH | Open MPI |"
echo "| --- | --- | --- | --- |"
for op in spawn4 connect jobs; do
  case $op in
    spawn4) row="| spawn 4 + barrier + disconnect" ;;
    connect) row="| open port + accept/connect + barrier + disconnect (2 ranks, one job)" ;;
    jobs) row="| accept/connect + barrier + disconnect between two separately started jobs" ;;
  esac
  for i in gridwire mpich openmpi; do
    v=$(awk -v i="$i" -v o="$op" '$1==i && $2==o && $3!="fails" {print $3}' "$raw" | median)
    f=$(awk -v i="$i" -v o="$op" '$1==i && $2==o && $3=="fails"' "$raw" | wc -l)
    if [ -n "$v" ]; then row="$row | $v"; elif [ "$f" -gt 0 ]; then row="$row | fails"; else row="$row | -"; fi
  done
  echo "$row |"
done
