#!/usr/bin/env bash
# One-sided (RMA) osu-style benchmarks: bench/mpi/osu_rma.c built against
# gridwire (gwcc), Debian's MPICH and Debian's Open MPI, all run in this one
# invocation, 2 ranks on one host ("shm") and on two emulated hosts ("tcp"),
# for each window flavour (allocate, create, dynamic). Not a test: prints
# Markdown tables (for docs/benchmarks.md) with gridwire/peer ratios.
#
#   bench/rma.sh                       (run by `make bench` via bench/run.sh)
# Env: RUNS (default 3; medians, the runs of all configurations interleaved),
#      OSU_MS (milliseconds per size, default 60), FLAVOURS (default
#      "allocate create dynamic"), CARGO_TARGET_DIR.
#      CONFIGS (default: every one of gw-shm gw-tcp mpich-shm mpich-tcp
#      ompi-shm ompi-tcp that can run here), OSU_ONLY (default all rows:
#      the rows of osu_rma to run, e.g. "putbw getbw"; tables of the
#      others are left out).
# "tcp" means one-sided operations really cross TCP, for every
# implementation (checked by hand, docs/benchmarks.md "a fair tcp column"):
# gridwire's two ranks run on two emulated hosts; MPICH (ch4:ucx) with
# MPIR_CVAR_NOLOCAL=1 (no shared-memory windows, every rank its own node)
# and UCX_TLS=tcp,self (no shared-memory or CMA transport under UCX's RMA);
# Open MPI with --mca pml ob1 --mca btl tcp,self --mca osc pt2pt: without
# the last, Open MPI 4.1 maps windows of one node through its osc/sm
# component whatever the btl (puts of 0.03 µs: shared memory, not tcp),
# and osc/pt2pt sends one-sided operations as messages over the pml.
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-3}
export OSU_MS=${OSU_MS:-60}
FLAVOURS=${FLAVOURS:-allocate create dynamic}
W=$T/bench-rma
mkdir -p "$W"
export MPIEXEC_TIMEOUT=300

CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GWRUN=$T/release/gwrun
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/rma_gw" bench/mpi/osu_rma.c || exit 1
have_mpich=0; have_ompi=0
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$W/rma_mpich" bench/mpi/osu_rma.c && have_mpich=1
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$W/rma_ompi" bench/mpi/osu_rma.c && have_ompi=1

run_config() { # config -> "NAME-FLAVOUR SIZE VALUE" lines
  case $1 in
    gw-shm) "$GWRUN" -n 2 --timeout 300 "$W/rma_gw" $FLAVOURS ;;
    gw-tcp) "$GWRUN" -n 2 --emulate-hosts 2 --timeout 300 "$W/rma_gw" $FLAVOURS ;;
    mpich-shm) mpiexec.mpich -n 2 "$W/rma_mpich" $FLAVOURS ;;
    mpich-tcp) MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 "$W/rma_mpich" $FLAVOURS ;;
    ompi-shm) mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 "$W/rma_ompi" $FLAVOURS ;;
    ompi-tcp) mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self --mca osc pt2pt -n 2 "$W/rma_ompi" $FLAVOURS ;;
  esac
}
configs="gw-shm gw-tcp"
[ $have_mpich = 1 ] && configs="$configs mpich-shm mpich-tcp"
[ $have_ompi = 1 ] && configs="$configs ompi-shm ompi-tcp"
if [ -n "${CONFIGS:-}" ]; then
  configs=$(for c in $configs; do case " $CONFIGS " in *" $c "*) echo "$c" ;; esac; done | xargs)
fi

load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u '+%Y-%m-%d %H:%M UTC')
raw=$W/raw.txt
: >"$raw"
for r in $(seq "$RUNS"); do
  for c in $configs; do
    t0=$SECONDS
    out=$(timeout 600 bash -c "$(declare -f run_config); W='$W' GWRUN='$GWRUN' FLAVOURS='$FLAVOURS'; run_config $c" 2>"$W/$c.err")
    rc=$?
    echo "bench/rma.sh: run $r/$RUNS: $c: $((SECONDS - t0)) s, load $(cut -d' ' -f1 /proc/loadavg)" >&2
    [ $rc -ne 0 ] && echo "bench/rma.sh: $c exited $rc (see $W/$c.err)" >&2
    grep -E '^[a-z]+-[a-z]+ [0-9]+ [0-9.]+$' <<<"$out" | sed "s/^/$c /" >>"$raw"
  done
done
med=$W/medians.txt
sort -k1,1 -k2,2 -k3,3n -k4,4g "$raw" | awk '
  function flush() { if (n) print key, v[int((n + 1) / 2)]; n = 0 }
  { k = $1 " " $2 " " $3; if (k != key) { flush(); key = k } v[++n] = $4 }
  END { flush() }' >"$med"
get() { awk -v c="$1" -v k="$2" -v s="$3" '$1==c && $2==k && $3==s {print $4}' "$med"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
human() { awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%d MiB", s / 1048576; else if (s >= 1024) printf "%d KiB", s / 1024; else printf "%d B", s }'; }
table() { # name
  local k=$1 s
  grep -q " $k " "$med" || return 0
  echo "| size | gridwire shm | MPICH shm | Open MPI shm | gw/MPICH | gw/Open MPI | gridwire tcp | MPICH tcp | Open MPI tcp | gw/MPICH | gw/Open MPI |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for s in $(awk -v k="$k" '$2==k {print $3}' "$med" | sort -n -u); do
    local gs ms os gt mt ot
    gs=$(get gw-shm "$k" "$s"); ms=$(get mpich-shm "$k" "$s"); os=$(get ompi-shm "$k" "$s")
    gt=$(get gw-tcp "$k" "$s"); mt=$(get mpich-tcp "$k" "$s"); ot=$(get ompi-tcp "$k" "$s")
    echo "| $(human "$s") | $gs | $ms | $os | $(ratio "$gs" "$ms") | $(ratio "$gs" "$os") | $gt | $mt | $ot | $(ratio "$gt" "$mt") | $(ratio "$gt" "$ot") |"
  done
  echo
}

echo "### One-sided (osu-style), $start"
echo
echo "Command: \`bench/rma.sh\` (RUNS=$RUNS, OSU_MS=$OSU_MS, FLAVOURS=\"$FLAVOURS\"${OSU_ONLY:+, OSU_ONLY=\"$OSU_ONLY\"}; also run by \`make bench\`). Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -sr); load average before the run: $load."
echo "Each figure is the median of $RUNS runs of \`bench/mpi/osu_rma.c\` (2 ranks: rank 0 the origin, rank 1 the target), the runs of all configurations interleaved ($configs)."
echo "\"tcp\": one-sided operations cross TCP for all three: gridwire on two emulated hosts (\`gwrun -n 2 --emulate-hosts 2\`), MPICH with \`MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self\`, Open MPI with \`--mca pml ob1 --mca btl tcp,self --mca osc pt2pt\` (its default osc/sm maps one node's windows whatever the btl)."
echo "Ratios are gridwire / peer: below 1 is better for times, above 1 for bandwidths. Goal (issue 15): ≤ 1× the better peer's latency, ≥ 1× its bandwidth."
echo
for f in $FLAVOURS; do
  for k in putlock getlock putfence getfence putpscw getpscw acclock foplock; do
    case $k in
      putlock) what="MPI_Put + MPI_Win_flush in a lock epoch, µs per op" ;;
      getlock) what="MPI_Get + MPI_Win_flush in a lock epoch, µs per op" ;;
      putfence) what="MPI_Put between fences, µs per op" ;;
      getfence) what="MPI_Get between fences, µs per op" ;;
      putpscw) what="MPI_Put in a post/start/complete/wait epoch, µs per op" ;;
      getpscw) what="MPI_Get in a post/start/complete/wait epoch, µs per op" ;;
      acclock) what="MPI_Accumulate (MPI_SUM, doubles) + flush, µs per op" ;;
      foplock) what="MPI_Fetch_and_op (MPI_SUM, one long) + flush, µs per op" ;;
    esac
    grep -q " $k-$f " "$med" || continue
    echo "#### $what — window from \`MPI_Win_$( [ "$f" = dynamic ] && echo create_dynamic || echo "$f")\`"
    echo
    table "$k-$f"
  done
  for k in putbw getbw; do
    grep -q " $k-$f " "$med" || continue
    echo "#### $( [ $k = putbw ] && echo MPI_Put || echo MPI_Get ) bandwidth (64 ops per flush, MB/s) — window from \`MPI_Win_$( [ "$f" = dynamic ] && echo create_dynamic || echo "$f")\`"
    echo
    table "$k-$f"
  done
done
exit 0
