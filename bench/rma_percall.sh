#!/usr/bin/env bash
# The per-call cost of one-sided operations on one host (2 ranks, shm):
# bench/mpi/rma_percall.c built against gridwire (gwcc), Debian's MPICH and
# Debian's Open MPI, the runs of the three interleaved. Reports the fastest
# batch per call (the call path when the scheduler left the process alone)
# and the median batch, each the median over RUNS runs, with gridwire/peer
# ratios. Complements bench/rma.sh, whose averages on a loaded machine are
# mostly preemptions. Not a test: prints a Markdown table.
#
#   bench/rma_percall.sh        Env: RUNS (default 3), FLAVOURS (default
#                               "allocate create dynamic"), CARGO_TARGET_DIR,
#                               GW_BASE_LIBDIR (also run gridwire with the
#                               libmpi.so there, e.g. main's, as a "before"
#                               column of the same run).
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-3}
FLAVOURS=${FLAVOURS:-allocate create dynamic}
W=$T/bench-rma-percall
mkdir -p "$W"
CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/pc_gw" bench/mpi/rma_percall.c || exit 1
configs=gw
if [ -n "${GW_BASE_LIBDIR:-}" ]; then
  GW_MPI_LIBDIR=$GW_BASE_LIBDIR scripts/gwcc -O2 -o "$W/pc_gwbase" bench/mpi/rma_percall.c || exit 1
  configs="$configs gwbase"
fi
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$W/pc_mpich" bench/mpi/rma_percall.c && configs="$configs mpich"
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$W/pc_ompi" bench/mpi/rma_percall.c && configs="$configs ompi"
run() {
  case $1 in
    gw) "$T/release/gwrun" -n 2 --timeout 300 "$W/pc_gw" $FLAVOURS ;;
    gwbase) "$T/release/gwrun" -n 2 --timeout 300 "$W/pc_gwbase" $FLAVOURS ;;
    mpich) mpiexec.mpich -n 2 "$W/pc_mpich" $FLAVOURS ;;
    ompi) mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 "$W/pc_ompi" $FLAVOURS ;;
  esac
}
load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u '+%Y-%m-%d %H:%M UTC')
raw=$W/raw.txt
: >"$raw"
for r in $(seq "$RUNS"); do
  for c in $configs; do
    out=$(timeout 600 bash -c "$(declare -f run); T='$T' W='$W' FLAVOURS='$FLAVOURS'; run $c" 2>"$W/$c.err")
    echo "bench/rma_percall.sh: run $r/$RUNS: $c: load $(cut -d' ' -f1 /proc/loadavg)" >&2
    grep -E '^[a-z0-9]+-[a-z]+ [0-9.]+ [0-9.]+$' <<<"$out" | sed "s/^/$c /" >>"$raw"
  done
done
# Median over the runs of each column (fastest batch, median batch).
med() { awk -v c="$1" -v k="$2" -v f="$3" '$1==c && $2==k {print $f}' "$raw" | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
echo "### One-sided per-call cost on one host, $start"
echo
echo "Command: \`bench/rma_percall.sh\` (RUNS=$RUNS); load average before: $load, at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Per call in ns (bandwidth rows: MB/s); \"best\" = fastest of 300 batches, \"median\" = median batch; each the median over $RUNS interleaved runs."
echo
base_head=; base_rule=
if [ -n "${GW_BASE_LIBDIR:-}" ]; then
  echo "\"gw before\": the same program and launcher with the library in \`$GW_BASE_LIBDIR\`, in the same interleaved runs."
  echo
  base_head=" gw before best | gw/before |"; base_rule=" ---: | ---: |"
fi
echo "| operation | window | gw best | MPICH best | Open MPI best | gw/MPICH | gw/Open MPI |$base_head gw median | MPICH median | Open MPI median |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |$base_rule ---: | ---: | ---: |"
for f in $FLAVOURS; do
  for op in put8 get8 acc8 fop8 putbw4k acc32k putfence8 getfence8; do
    k=$op-$f
    g=$(med gw "$k" 3); m=$(med mpich "$k" 3); o=$(med ompi "$k" 3)
    gm=$(med gw "$k" 4); mm=$(med mpich "$k" 4); om=$(med ompi "$k" 4)
    base=
    if [ -n "${GW_BASE_LIBDIR:-}" ]; then b=$(med gwbase "$k" 3); base=" $b | $(ratio "$g" "$b") |"; fi
    echo "| $op | $f | $g | $m | $o | $(ratio "$g" "$m") | $(ratio "$g" "$o") |$base $gm | $mm | $om |"
  done
done
