#!/usr/bin/env bash
# What the Fortran layer costs (docs/fortran.md, docs/benchmarks.md). Not a test.
#   bash bench/fortran.sh            # after `make build` (release libmpi, gwrun, fortran/)
# 1. callcost: ns per MPI_Comm_rank / MPI_Type_size / MPI_Send(MPI_PROC_NULL) call
#    (the fastest repetition) from C, from `use mpi` and from `use mpi_f08`, one rank
#    (bench/fortran/callcost_{c.c,f.f90});
# 2. latency: ping-pong between 2 ranks on this host under gwrun, the same loop in
#    C (latency_c.c, gwcc) and in mpi_f08 (latency_f08.f90, gwfort), and the
#    mpi_f08 one built with MPICH's mpifort under mpiexec.mpich when installed.
# Environment: RUNS (default 5; latency keeps the median), ITERS (ping-pongs, default 20000).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rel=${CARGO_TARGET_DIR:-$root/target}/release
runs=${RUNS:-5}
iters=${ITERS:-20000}
out=$rel/bench-fortran
mkdir -p "$out"
for f in "$rel/libmpi.so" "$rel/gwrun"; do
  [ -e "$f" ] || { echo "bench/fortran.sh: $f missing; run 'make build' first" >&2; exit 1; }
done
bash fortran/build.sh "$rel/fortran"
export GW_MPI_LIBDIR=$rel
scripts/gwfort -O2 -o "$out/callcost_f" bench/fortran/callcost_f.f90
scripts/gwcc -O2 -o "$out/callcost_c" bench/fortran/callcost_c.c
scripts/gwfort -O2 -o "$out/latency_f08" bench/fortran/latency_f08.f90
scripts/gwcc -O2 -o "$out/latency_c" bench/fortran/latency_c.c
mpich=no
if command -v mpifort.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
  mpifort.mpich -O2 -o "$out/latency_f08_mpich" bench/fortran/latency_f08.f90 && mpich=yes
fi

# fastest KEY FILE...: the smallest value on lines starting with KEY (per-call costs:
# interference from other jobs only adds time).
fastest() {
  local key=$1; shift
  cat "$@" | awk -v k="$key" 'index($0, k " ") == 1 { print $NF }' | sort -g | head -1
}

# median KEY FILE...: the median over the runs of the value on lines starting with KEY.
median() {
  local key=$1; shift
  cat "$@" | awk -v k="$key" 'index($0, k " ") == 1 { print $NF }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

echo "== callcost (ns per call, 1 rank, fastest of $runs runs x 10 repetitions of 10^6 calls)"
for r in $(seq "$runs"); do
  "$rel/gwrun" -n 1 "$out/callcost_c" >"$out/callcost_c.$r"
  "$rel/gwrun" -n 1 "$out/callcost_f" >"$out/callcost_f.$r"
done
for call in comm_rank type_size send_proc_null; do
  c=$(fastest "c $call ns" "$out"/callcost_c.*)
  f=$(fastest "use_mpi $call ns" "$out"/callcost_f.*)
  g=$(fastest "mpi_f08 $call ns" "$out"/callcost_f.*)
  printf '%-15s C %6s   use mpi %6s (%s)   mpi_f08 %6s (%s)\n' "$call" "$c" "$f" \
    "$(echo "$f $c" | awk '{ printf "%+.2f", $1 - $2 }')" "$g" "$(echo "$g $c" | awk '{ printf "%+.2f", $1 - $2 }')"
done

echo "== latency (one-way µs, 2 ranks on one host, median of $runs, $iters ping-pongs)"
for r in $(seq "$runs"); do
  "$rel/gwrun" -n 2 "$out/latency_c" "$iters" >"$out/lat_c.$r"
  "$rel/gwrun" -n 2 "$out/latency_f08" "$iters" >"$out/lat_f.$r"
  [ $mpich = yes ] && mpiexec.mpich -n 2 "$out/latency_f08_mpich" "$iters" >"$out/lat_m.$r"
done
printf '%6s %10s %12s %8s %14s %12s\n' size "gw C" "gw mpi_f08" "f08/C" "mpich mpi_f08" "gw/mpich"
for n in 0 8 64 1024 8192; do
  c=$(median "lat $n" "$out"/lat_c.*)
  f=$(median "lat $n" "$out"/lat_f.*)
  m=-; ratio=-
  if [ $mpich = yes ]; then
    m=$(median "lat $n" "$out"/lat_m.*)
    ratio=$(echo "$f $m" | awk '{ printf "%.2f", $1 / $2 }')
  fi
  printf "%6s %10s %12s %8s %14s %12s\n" "$n" "$c" "$f" "$(echo "$f $c" | awk '{ printf "%.3f", $1 / $2 }')" "$m" "$ratio"
done
