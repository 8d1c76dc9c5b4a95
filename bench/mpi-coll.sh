#!/usr/bin/env bash
# The 2-rank collective rows of bench/mpi.sh alone, for iterating on them:
# bench/mpi/osu.c's allreduce, bcast, alltoall, reduce, allgather and barrier
# for gridwire, MPICH and Open MPI, run the way bench/mpi.sh runs them (shm:
# one host, ranks pinned one per core; tcp: two emulated hosts for gridwire,
# MPICH and Open MPI forced onto TCP), the runs of all configurations
# interleaved. Prints per figure the median of RUNS runs for each MPI and
# gridwire's ratio to the better peer (below 1: gridwire faster). Not a test.
#
#   bench/mpi-coll.sh [shm|tcp|both]      (default both)
# Env: RUNS (default 5), OSU_MS (default 60), CARGO_TARGET_DIR, GW_ONLY_BUILD=1
#      (build and exit), COLLS (default "allreduce bcast alltoall reduce
#      allgather barrier"), GW_LABEL (a name for this build in the output),
#      NO_BUILD=1 (use the binaries of the last run), GW_BASE_LIB=DIR (a
#      directory holding another build's libmpi.so: run it too, as "base",
#      interleaved with the others, for before/after ratios in one run),
#      STAT=min (the least of the runs rather than the median), REPORT_ONLY=1
#      (the tables again from the last run's raw.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-5}
export OSU_MS=${OSU_MS:-60}
COLLS=${COLLS:-allreduce bcast alltoall reduce allgather barrier}
W=$T/bench-mpi-coll
mkdir -p "$W"
export MPIEXEC_TIMEOUT=300
which=${1:-both}

if [ "${NO_BUILD:-0}" != 1 ] && [ "${REPORT_ONLY:-0}" != 1 ]; then
  CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
  GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/osu_gw" bench/mpi/osu.c || exit 1
  if [ -n "${GW_BASE_LIB:-}" ]; then
    GW_MPI_LIBDIR=$GW_BASE_LIB scripts/gwcc -O2 -o "$W/osu_base" bench/mpi/osu.c || exit 1
  fi
  [ -x "$W/osu_mpich" ] || mpicc.mpich -O2 -Wno-stringop-overflow -o "$W/osu_mpich" bench/mpi/osu.c || exit 1
  [ -x "$W/osu_ompi" ] || mpicc.openmpi -O2 -o "$W/osu_ompi" bench/mpi/osu.c || exit 1
fi
[ "${GW_ONLY_BUILD:-0}" = 1 ] && exit 0
GWRUN=$T/release/gwrun

run_config() { # as bench/mpi.sh's run_config
  case $1 in
    gw-shm) "$GWRUN" -n 2 --bind-to core --timeout 300 "$W/osu_gw" $COLLS ;;
    gw-tcp) "$GWRUN" -n 2 --emulate-hosts 2 --timeout 300 "$W/osu_gw" $COLLS ;;
    base-shm) "$GWRUN" -n 2 --bind-to core --timeout 300 "$W/osu_base" $COLLS ;;
    base-tcp) "$GWRUN" -n 2 --emulate-hosts 2 --timeout 300 "$W/osu_base" $COLLS ;;
    mpich-shm) mpiexec.mpich -bind-to core -n 2 "$W/osu_mpich" $COLLS ;;
    mpich-tcp) MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 "$W/osu_mpich" $COLLS ;;
    ompi-shm) mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to core -n 2 "$W/osu_ompi" $COLLS ;;
    ompi-tcp) mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self -n 2 "$W/osu_ompi" $COLLS ;;
  esac
}
case $which in
  shm) methods=shm ;;
  tcp) methods=tcp ;;
  *) methods="shm tcp" ;;
esac
mpis="gw mpich ompi"
[ -n "${GW_BASE_LIB:-}" ] && mpis="base gw mpich ompi"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
raw=$W/raw.txt
[ "${REPORT_ONLY:-0}" = 1 ] || : >"$raw"
for r in $(seq "$RUNS"); do
  [ "${REPORT_ONLY:-0}" = 1 ] && break
  for m in $methods; do
    for mpi in $mpis; do
      out=$(timeout 400 bash -c "$(declare -f run_config); W='$W' GWRUN='$GWRUN' COLLS='$COLLS'; run_config $mpi-$m" 2>"$W/$mpi-$m.err")
      grep -E '^[a-z_]+ [0-9]+ [0-9.]+$' <<<"$out" | sed "s/^/$mpi-$m /" >>"$raw"
    done
  done
  echo "bench/mpi-coll.sh: run $r/$RUNS done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# bench/mpi-coll.sh $which ${GW_LABEL:-} $(date -u '+%Y-%m-%d %H:%M UTC'), RUNS=$RUNS OSU_MS=$OSU_MS STAT=${STAT:-median}, load before $load0, after $load1"
# medians per (config, name, size)
# STAT=min: the least of the runs instead (on a loaded machine interference
# only ever slows a run down).
sort -k1,1 -k2,2 -k3,3n -k4,4g "$raw" | awk -v stat="${STAT:-median}" '
  function flush() { if (n) print key, (stat == "min" ? v[1] : v[int((n + 1) / 2)]); n = 0 }
  { k = $1 " " $2 " " $3; if (k != key) { flush(); key = k } v[++n] = $4 }
  END { flush() }' >"$W/medians.txt"
for m in $methods; do
  echo "| $m | size | gridwire µs | MPICH µs | Open MPI µs | gw / better | base µs | base / better | gw / base |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  awk -v m="$m" '
    { split($1, c, "-"); if (c[2] != m) next; k = $2 " " $3; val[c[1], k] = $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
    END {
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, p, " ")
        g = val["gw", k]; a = val["mpich", k]; o = val["ompi", k]
        b = (a != "" && (o == "" || a + 0 < o + 0)) ? a : o
        r = (g != "" && b != "" && b > 0) ? sprintf("%.2f", g / b) : "n/a"
        z = val["base", k]
        rb = (z != "" && b != "" && b > 0) ? sprintf("%.2f", z / b) : ""
        gz = (z != "" && g != "" && z > 0) ? sprintf("%.2f", g / z) : ""
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], g, a, o, r, z, rb, gz
      }
    }' "$W/medians.txt"
  echo
done
