#!/usr/bin/env bash
# MPI (osu-style) benchmarks: bench/mpi/osu.c built against gridwire (gwcc),
# Debian's MPICH and Debian's Open MPI, all run in this one invocation, with
# 2 ranks on one host and 2 ranks on two emulated hosts (tcp), next to the raw
# TCP floor (bench/c/tcp_pingpong.c). Not a test: prints Markdown tables (for
# docs/benchmarks.md) with ratios and the targets (round 1, and round 2 of
# issue 18: ratios to the better of MPICH and Open MPI, one verdict per
# target), and draws plots per figure family and method (PNG): latency, bw,
# bibw, rate, collectives. Also runs bench/mpi/thread_multiple.c (2 ranks x 2
# threads under MPI_THREAD_MULTIPLE, one communicator per thread) on one host
# for each MPI (reported, not a target).
#
#   bench/mpi.sh                       (run by `make bench` via bench/run.sh)
# Env: RUNS (default 3; each figure is the median of RUNS runs, the runs of
#      all nine configurations interleaved so that noise falls on all alike),
#      OSU_MS (milliseconds per message size, default 60), CARGO_TARGET_DIR,
#      PLOT_DIR (default docs/img), NETPIPE=1 to also run bench/netpipe.sh,
#      PAIRS=0 to skip the oversubscribed pairs (2 x cores ranks, bench/mpi/pairs.c).
#
# How "two hosts" is forced for the peers (both would use shared memory):
#   MPICH (ch4:ucx):  MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self
#   Open MPI:         --mca pml ob1 --mca btl tcp,self
#   gridwire:         gwrun -n 2 --emulate-hosts 2 (tcp between the hosts)
#
# The tcp target is also measured pinned (PIN_CPUS, default "0 1"): on a
# small VM which CPU runs the accepting end of a loopback connection can move
# a ping-pong by a third, and an unpinned run lands on either placement at
# random. Raw TCP and gridwire each run in both placements (A,B and B,A);
# the target compares the faster placement with the faster, the slower with
# the slower, and reports the worse of the two ratios.
set -uo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
RUNS=${RUNS:-3}
export OSU_MS=${OSU_MS:-60}
PLOT_DIR=${PLOT_DIR:-docs/img}
W=$T/bench-mpi
mkdir -p "$W"
export MPIEXEC_TIMEOUT=300

CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GWRUN=$T/release/gwrun
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/osu_gw" bench/mpi/osu.c || exit 1
gcc -O2 -o "$W/tcp_pingpong" bench/c/tcp_pingpong.c || exit 1
have_mpich=0; have_ompi=0
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -Wno-stringop-overflow -o "$W/osu_mpich" bench/mpi/osu.c && have_mpich=1
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$W/osu_ompi" bench/mpi/osu.c && have_ompi=1
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -pthread -o "$W/tm_gw" bench/mpi/thread_multiple.c || exit 1
[ $have_mpich = 1 ] && { mpicc.mpich -O2 -pthread -o "$W/tm_mpich" bench/mpi/thread_multiple.c || exit 1; }
[ $have_ompi = 1 ] && { mpicc.openmpi -O2 -pthread -o "$W/tm_ompi" bench/mpi/thread_multiple.c || exit 1; }

# config name -> command (each prints "NAME SIZE VALUE" lines)
run_config() {
  case $1 in
    # One host: every MPI with its two ranks pinned one per core, as the
    # issue's ratios ask (Open MPI binds to cores by default; without
    # pinning, a loaded machine costs gridwire and MPICH a scheduler tick
    # per window of the rate loop, Open MPI not).
    gw-shm) "$GWRUN" -n 2 --bind-to core --timeout 300 "$W/osu_gw" ;;
    gw-tcp) "$GWRUN" -n 2 --emulate-hosts 2 --timeout 300 "$W/osu_gw" ;;
    mpich-shm) mpiexec.mpich -bind-to core -n 2 "$W/osu_mpich" ;;
    mpich-tcp) MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 "$W/osu_mpich" ;;
    ompi-shm) mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to core -n 2 "$W/osu_ompi" ;;
    ompi-tcp) mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self -n 2 "$W/osu_ompi" ;;
    raw-spin | raw-block) # the raw TCP floor at every latency size, busy-polling or blocking
      for s in 0 1 8 64 512 4096 32768 262144 1048576 4194304; do
        it=$(( s <= 4096 ? 5000 : s <= 262144 ? 1000 : 50 )); mode=
        # busy-polling on a loaded machine can take a time slice per message
        [ "$1" = raw-spin ] && { mode=spin; [ "$s" -le 4096 ] && it=2000; }
        echo "lat $s $("$W/tcp_pingpong" "$s" "$it" $mode)"
      done ;;
    raw-pin-ab | raw-pin-ba) # raw TCP floor, busy-polling, pinned (0, 1, 8 B only)
      pin=$PIN_A,$PIN_B; [ "$1" = raw-pin-ba ] && pin=$PIN_B,$PIN_A
      # 20000 round trips (about 60 ms, like OSU_MS): a shorter run has a luckier minimum
      for s in 0 1 8; do echo "lat $s $(PIN=$pin "$W/tcp_pingpong" "$s" 20000 spin)"; done ;;
    gw-tcp-pin-ab) "$GWRUN" -n 2 --emulate-hosts 2 --bind-to "user:$PIN_A,$PIN_B" --timeout 300 "$W/osu_gw" latency ;;
    gw-tcp-pin-ba) "$GWRUN" -n 2 --emulate-hosts 2 --bind-to "user:$PIN_B,$PIN_A" --timeout 300 "$W/osu_gw" latency ;;
    # MPI_THREAD_MULTIPLE, 2 ranks x 2 threads on one host ("tm 8 K round trips/s")
    gw-tm) "$GWRUN" -n 2 --timeout 120 "$W/tm_gw" ;;
    mpich-tm) mpiexec.mpich -n 2 "$W/tm_mpich" ;;
    ompi-tm) mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 "$W/tm_ompi" ;;
  esac
}
read -r PIN_A PIN_B <<<"${PIN_CPUS:-0 1}"
export PIN_A PIN_B
configs="raw-spin raw-block gw-shm gw-tcp gw-tm"
[ "$(nproc)" -ge 2 ] && configs="$configs raw-pin-ab raw-pin-ba gw-tcp-pin-ab gw-tcp-pin-ba"
[ $have_mpich = 1 ] && configs="$configs mpich-shm mpich-tcp mpich-tm"
[ $have_ompi = 1 ] && configs="$configs ompi-shm ompi-tcp ompi-tm"

load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u '+%Y-%m-%d %H:%M UTC')
raw=$W/raw.txt
[ "${REPORT_ONLY:-0}" = 1 ] || : >"$raw"   # REPORT_ONLY=1: tables and plots again from the last run's raw.txt
for r in $(seq "$RUNS"); do
  [ "${REPORT_ONLY:-0}" = 1 ] && break
  for c in $configs; do
    t0=$SECONDS
    out=$(timeout 400 bash -c "$(declare -f run_config); W='$W' GWRUN='$GWRUN'; run_config $c" 2>"$W/$c.err")
    rc=$?
    echo "bench/mpi.sh: run $r/$RUNS: $c: $((SECONDS - t0)) s, load $(cut -d' ' -f1 /proc/loadavg)" >&2
    [ $rc -ne 0 ] && echo "bench/mpi.sh: $c exited $rc (see $W/$c.err)" >&2
    grep -E '^[a-z_]+ [0-9]+ [0-9.]+$' <<<"$out" | sed "s/^/$c /" >>"$raw"
  done
done
# medians: "config name size median min max"
med=$W/medians.txt
sort -k1,1 -k2,2 -k3,3n -k4,4g "$raw" | awk '
  function flush() { if (n) print key, v[int((n + 1) / 2)], v[1], v[n]; n = 0 }
  { k = $1 " " $2 " " $3; if (k != key) { flush(); key = k } v[++n] = $4 }
  END { flush() }' >"$med"

# COL: 4 = median, 5 = least, 6 = greatest of the runs
COL=4
get() { awk -v c="$1" -v k="$2" -v s="$3" -v col="$COL" '$1==c && $2==k && $3==s {print $col}' "$med"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
human() { awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%d MiB", s / 1048576; else if (s >= 1024) printf "%d KiB", s / 1024; else printf "%d B", s }'; }
# worst (largest for "max", smallest for "min") ratio of gridwire to REF over sizes
worst() { # how name gwcfg refcfg sizes...
  local how=$1 k=$2 a=$3 b=$4; shift 4
  for s in "$@"; do ratio "$(get "$a" "$k" "$s")" "$(get "$b" "$k" "$s")"; echo; done | grep -v n/a |
    sort -g | { if [ "$how" = max ]; then tail -1; else head -1; fi; }
}
met() { # value op goal
  awk -v v="$1" -v op="$2" -v g="$3" 'BEGIN { if (v == "") print "no data"; else if ((op == "<=" && v <= g) || (op == ">=" && v >= g)) print "**met**"; else print "**not met**" }'
}

table() { # name unit sizes...
  local k=$1 unit=$2; shift 2
  echo "| size | gridwire shm | MPICH shm | Open MPI shm | gw/MPICH | gw/Open MPI | gridwire tcp | MPICH tcp | Open MPI tcp | gw/MPICH | gw/Open MPI |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for s in "$@"; do
    local gs ms os gt mt ot
    gs=$(get gw-shm "$k" "$s"); ms=$(get mpich-shm "$k" "$s"); os=$(get ompi-shm "$k" "$s")
    gt=$(get gw-tcp "$k" "$s"); mt=$(get mpich-tcp "$k" "$s"); ot=$(get ompi-tcp "$k" "$s")
    echo "| $(human "$s") | $gs | $ms | $os | $(ratio "$gs" "$ms") | $(ratio "$gs" "$os") | $gt | $mt | $ot | $(ratio "$gt" "$mt") | $(ratio "$gt" "$ot") |"
  done
  echo
}

P2P="0 1 8 64 512 1024 4096 8192 16384 32768 65536 262144 1048576 4194304"
TOUCH="4096 8192 16384 32768 65536"
RATE="1 8 64"
COLL="8 64 512 4096 32768 262144 1048576"
floor_of() { # the better of busy-polling and blocking raw TCP at SIZE
  printf '%s\n%s\n' "$(get raw-spin lat "$1")" "$(get raw-block lat "$1")" | grep -v '^$' | sort -g | head -1
}
pinned_ratio() { # SIZE: worse of (faster gw placement / faster raw) and (slower / slower)
  local g1 g2 r1 r2
  g1=$(get gw-tcp-pin-ab lat "$1"); g2=$(get gw-tcp-pin-ba lat "$1")
  r1=$(get raw-pin-ab lat "$1"); r2=$(get raw-pin-ba lat "$1")
  awk -v a="$g1" -v b="$g2" -v c="$r1" -v d="$r2" 'BEGIN {
    if (a == "" || b == "" || c == "" || d == "") { print "n/a"; exit }
    gf = a < b ? a : b; gs = a < b ? b : a; rf = c < d ? c : d; rs = c < d ? d : c
    f = gf / rf; s = gs / rs; printf "%.2f", (f > s ? f : s) }'
}
targets() { # the four target ratios from column COL (times) and BWCOL (bandwidths)
  tcp_unpinned_worst=$(for s in 0 1 8; do ratio "$(get gw-tcp lat "$s")" "$(floor_of "$s")"; echo; done | grep -v n/a | sort -g | tail -1)
  tcp_ratio_worst=$(for s in 0 1 8; do pinned_ratio "$s"; echo; done | grep -v n/a | sort -g | tail -1)
  [ -z "$tcp_ratio_worst" ] && tcp_ratio_worst=$tcp_unpinned_worst
  lat_worst=$(worst max lat gw-shm mpich-shm 0 1 8)
  bw_worst=$(COL=$BWCOL worst min bw gw-shm mpich-shm 1048576 4194304)
  ar=$(ratio "$(get gw-shm allreduce 8)" "$(get mpich-shm allreduce 8)")
  [ "$ar" = n/a ] && ar=""
}
# best of the runs: least time, greatest bandwidth (noise only ever slows)
COL=5 BWCOL=6 targets
best="$lat_worst|$bw_worst|$ar|$tcp_ratio_worst|$tcp_unpinned_worst"
COL=4 BWCOL=4 targets
IFS='|' read -r lat_best bw_best ar_best tcp_best tcp_unpinned_best <<<"$best"

echo "### MPI (osu-style), $start"
echo
echo "Command: \`bench/mpi.sh\` (RUNS=$RUNS, OSU_MS=$OSU_MS; also run by \`make bench\`). Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -sr); load average before the run: $load."
echo "Each figure is the median of $RUNS runs of \`bench/mpi/osu.c\` (2 ranks), the runs of all configurations interleaved."
echo "\"shm\": 2 ranks on one host (\`gwrun -n 2\`, \`mpiexec.mpich -n 2\`, \`mpirun.openmpi -n 2\`, each MPI's default transport)."
echo "\"tcp\": 2 ranks on two emulated hosts: \`gwrun -n 2 --emulate-hosts 2\`; MPICH forced onto TCP with \`MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self\`; Open MPI with \`--mca pml ob1 --mca btl tcp,self\`."
echo "Ratios are gridwire / peer: below 1 is better for times, above 1 is better for bandwidths."
echo
echo "#### Targets"
echo
echo "| target | gridwire / reference (medians) | goal | | best of $RUNS runs each | |"
echo "| --- | ---: | --- | --- | ---: | --- |"
echo "| intra-host 0–8 B latency / MPICH (worst of 0, 1, 8 B) | $lat_worst | ≤ 1.00 | $(met "$lat_worst" "<=" 1.00) | $lat_best | $(met "$lat_best" "<=" 1.00) |"
echo "| intra-host 1 MiB–4 MiB bandwidth / MPICH (worst of 1, 4 MiB) | $bw_worst | ≥ 1.00 | $(met "$bw_worst" ">=" 1.00) | $bw_best | $(met "$bw_best" ">=" 1.00) |"
echo "| 8 B allreduce, 2 ranks, intra-host / MPICH | ${ar:-n/a} | ≤ 1.00 | $(met "$ar" "<=" 1.00) | ${ar_best:-n/a} | $(met "$ar_best" "<=" 1.00) |"
echo "| tcp 0–8 B latency / raw TCP floor, pinned alike (worst of 0, 1, 8 B and of the two placements) | $tcp_ratio_worst | ≤ 1.10 | $(met "$tcp_ratio_worst" "<=" 1.10) | $tcp_best | $(met "$tcp_best" "<=" 1.10) |"
echo "| the same, unpinned (each side placed by the scheduler; not like for like) | $tcp_unpinned_worst | | | $tcp_unpinned_best | |"
echo
echo "\"Best of runs\" compares the least time (greatest bandwidth) of the $RUNS runs on each side: on a shared machine interference only ever slows a run down."
echo
echo "Raw TCP floor (\`bench/c/tcp_pingpong\`, loopback, TCP_NODELAY; a 0-byte message is sent as 1 byte), one-way µs:"
echo "busy-polling $(get raw-spin lat 0) / $(get raw-spin lat 1) / $(get raw-spin lat 8) at 0 / 1 / 8 B, blocking reads $(get raw-block lat 0) / $(get raw-block lat 1) / $(get raw-block lat 8); the floor is the better of the two."
echo "gridwire tcp at 0 / 1 / 8 B: $(get gw-tcp lat 0) / $(get gw-tcp lat 1) / $(get gw-tcp lat 8) µs."
if [ -n "$(get raw-pin-ab lat 8)" ]; then
  echo
  echo "Pinned (CPUs $PIN_A and $PIN_B; \"A,B\": raw TCP's accepting process, or gridwire's rank 0, on CPU $PIN_A), one-way µs at 0 / 1 / 8 B:"
  echo "raw busy-polling A,B $(get raw-pin-ab lat 0) / $(get raw-pin-ab lat 1) / $(get raw-pin-ab lat 8), B,A $(get raw-pin-ba lat 0) / $(get raw-pin-ba lat 1) / $(get raw-pin-ba lat 8);"
  echo "gridwire (\`gwrun --bind-to user:A,B\`) A,B $(get gw-tcp-pin-ab lat 0) / $(get gw-tcp-pin-ab lat 1) / $(get gw-tcp-pin-ab lat 8), B,A $(get gw-tcp-pin-ba lat 0) / $(get gw-tcp-pin-ba lat 1) / $(get gw-tcp-pin-ba lat 8)."
fi
echo
# the round-2 verdicts (issue 18) and the MPI_THREAD_MULTIPLE figure
source bench/mpi/round2.sh
echo "#### Latency (one-way ping-pong, µs)"
echo
table lat µs $P2P
echo "#### Bandwidth (window of 64 \`MPI_Isend\`, MB/s = 10^6 B/s)"
echo
table bw MB/s ${P2P#0 }
echo "#### Bidirectional bandwidth (window of 64 each way, MB/s, both directions summed)"
echo
table bibw MB/s ${P2P#0 }
echo "#### Allreduce (\`MPI_FLOAT\`, \`MPI_SUM\`, µs per call)"
echo
table allreduce µs $COLL
echo "#### Bcast (root 0, µs per call)"
echo
table bcast µs $COLL
echo "#### Alltoall (bytes per pair, µs per call)"
echo
table alltoall µs $COLL
echo "#### Reduce (\`MPI_FLOAT\`, \`MPI_SUM\`, root 0, µs per call)"
echo
table reduce µs $COLL
echo "#### Allgather (bytes per rank, µs per call)"
echo
table allgather µs $COLL
echo "#### Barrier (µs per call)"
echo
table barrier µs 0
echo "#### Latency with the sender writing its buffer before each send (µs, memset included)"
echo
table lat_touch µs $TOUCH
echo "#### Message rate (osu_mbw_mr style, 1 pair, window of 64, millions of messages per second)"
echo
table rate "M msg/s" $RATE

# Oversubscribed: twice as many ranks as cores, ping-ponging in pairs
# (bench/mpi/pairs.c), each MPI as it comes; the median of RUNS runs.
np=$(( $(nproc) * 2 ))
if [ "${PAIRS:-1}" = 1 ]; then
  GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/pairs_gw" bench/mpi/pairs.c 2>/dev/null
  [ $have_mpich = 1 ] && mpicc.mpich -O2 -o "$W/pairs_mpich" bench/mpi/pairs.c 2>/dev/null
  [ $have_ompi = 1 ] && mpicc.openmpi -O2 -o "$W/pairs_ompi" bench/mpi/pairs.c 2>/dev/null
  # REPORT_ONLY=1 shows the last run's pairs.txt again instead of running them
  [ "${REPORT_ONLY:-0}" = 1 ] || : >"$W/pairs.txt"
  for r in $(seq "$RUNS"); do
    [ "${REPORT_ONLY:-0}" = 1 ] && break
    echo "gw $(timeout 120 "$GWRUN" -n $np --timeout 100 "$W/pairs_gw" 2000 2>/dev/null)" >>"$W/pairs.txt"
    [ $have_mpich = 1 ] && echo "mpich $(timeout 120 mpiexec.mpich -n $np "$W/pairs_mpich" 2000 2>/dev/null)" >>"$W/pairs.txt"
    [ $have_ompi = 1 ] && echo "ompi $(timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe -n $np "$W/pairs_ompi" 2000 2>/dev/null)" >>"$W/pairs.txt"
  done
  pmed() { # median of the figures of one MPI ("n/a" when none ran)
    awk -v k="$1" '$1==k && NF==2 {print $2}' "$W/pairs.txt" | sort -g |
      awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'
  }
  echo "#### Oversubscribed: $np ranks on $(nproc) cores, ping-pong in pairs (\`bench/mpi/pairs.c\`, one-way µs, median of $RUNS)"
  echo
  echo "| gridwire | MPICH | Open MPI |"
  echo "| ---: | ---: | ---: |"
  echo "| $(pmed gw) | $(pmed mpich) | $(pmed ompi) |"
  echo
fi

# One log-log latency plot per method.
plotpy=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then plotpy=$py; break; fi
done
if [ -n "$plotpy" ]; then
  mkdir -p "$PLOT_DIR"
  "$plotpy" bench/mpi/plot.py "$med" "$PLOT_DIR" "$start" >&2 &&
    echo "Plots (\`$PLOT_DIR/\`): $(for f in latency bw bibw rate collectives; do printf '`mpi-%s-shm.png`, `mpi-%s-tcp.png`; ' "$f" "$f"; done | sed 's/; $//')."
else
  echo "bench/mpi.sh: no python3 with matplotlib (python3-matplotlib); plots skipped" >&2
fi
echo

if [ "${NETPIPE:-0}" = 1 ]; then bash bench/netpipe.sh; fi
exit 0
