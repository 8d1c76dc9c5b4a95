#!/usr/bin/env bash
# Instructions per message of the message-rate loop (osu_mbw_mr style: one
# pair, windows of 64 MPI_Isend against 64 pre-posted MPI_Irecv), counted by
# callgrind for gridwire, MPICH and Open MPI: a figure that the load of a
# shared machine does not move, unlike the rate itself (bench/mpi.sh).
#
#   bash bench/rate-instr.sh
# Env: RI_MPIS (default "gw mpich ompi"), RI_SIZES (default "1 8 64"),
#      RI_METHOD (shm or tcp, default shm), RI_WINDOWS (windows counted,
#      default 40, after 8 of warm-up; see bench/mpi/rate_count.c for how the
#      ranks take turns so that neither spins while the other works),
#      RI_THREAD=multiple (MPI_THREAD_MULTIPLE instead of MPI_Init),
#      RI_LOOP=latency (one message a turn, the one-way half of a latency
#      ping-pong: RI_WINDOWS then counts messages; the table gives the
#      sender's MPI_Send, the receiver's MPI_Irecv + MPI_Wait and one empty
#      MPI_Test, per message; see bench/mpi/rate_count.c),
#      CARGO_TARGET_DIR, GW_LIB and GWRUN (a libmpi.so directory and a gwrun
#      to count instead of this tree's release build; RI_LABEL names it).
# Prints a Markdown table: per message, instructions and locked instructions
# (lock-prefixed or exchanges with memory) of the sender and of the
# receiver, and the receiver's MPI_Irecv, the sender's MPI_Isend (per call)
# and each side's MPI_Waitall (per message).
# Not a test. Needs valgrind (callgrind) and objdump: says so and stops if missing.
set -uo pipefail
cd "$(dirname "$0")/.."
for tool in valgrind objdump python3; do
  command -v $tool >/dev/null || { echo "bench/rate-instr.sh: $tool is missing (apt-get install valgrind binutils)" >&2; exit 1; }
done
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
MPIS=${RI_MPIS:-gw mpich ompi}
SIZES=${RI_SIZES:-1 8 64}
METHOD=${RI_METHOD:-shm}
N=${RI_WINDOWS:-40}
W=$T/bench-rate-instr
mkdir -p "$W"
export MPIEXEC_TIMEOUT=600
LIB=${GW_LIB:-$T/release}
LABEL=${RI_LABEL:-gridwire}

if [ -z "${GW_LIB:-}" ]; then
  CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
fi
GWRUN=${GWRUN:-$T/release/gwrun}
for m in $MPIS; do
  case $m in
    gw) GW_MPI_LIBDIR=$LIB scripts/gwcc -O2 -g -o "$W/rc_gw" bench/mpi/rate_count.c || exit 1 ;;
    mpich) mpicc.mpich -O2 -g -o "$W/rc_mpich" bench/mpi/rate_count.c || exit 1 ;;
    ompi) mpicc.openmpi -O2 -g -o "$W/rc_ompi" bench/mpi/rate_count.c || exit 1 ;;
  esac
done

# rate_count.c reads RATE_THREAD (RI_THREAD was documented but never passed on).
export RATE_THREAD=${RI_THREAD:-single} RATE_LOOP=${RI_LOOP:-rate}
CG="valgrind --tool=callgrind --dump-instr=yes --dump-line=no --callgrind-out-file=%q{RI_OUT}/cg.%p"
# run MPI SIZE: one job, each rank under callgrind, profiles in a fresh directory
run() {
  local m=$1 s=$2 d=$W/$1.$METHOD.$2
  rm -rf "$d"; mkdir -p "$d"; mkfifo "$d/to0" "$d/to1"
  export RI_OUT=$d
  local args=("$s" "$N" "$d")
  case $m.$METHOD in
    gw.shm) GW_MPI_LIBDIR=$LIB "$GWRUN" -n 2 --bind-to core --timeout 900 $CG "$W/rc_gw" "${args[@]}" ;;
    gw.tcp) GW_MPI_LIBDIR=$LIB "$GWRUN" -n 2 --emulate-hosts 2 --timeout 900 $CG "$W/rc_gw" "${args[@]}" ;;
    mpich.shm) mpiexec.mpich -bind-to core -n 2 $CG "$W/rc_mpich" "${args[@]}" ;;
    mpich.tcp) MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 $CG "$W/rc_mpich" "${args[@]}" ;;
    ompi.shm) mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to core -x RI_OUT -x RATE_THREAD -x RATE_LOOP -n 2 $CG "$W/rc_ompi" "${args[@]}" ;;
    ompi.tcp) mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self -x RI_OUT -x RATE_THREAD -x RATE_LOOP -n 2 $CG "$W/rc_ompi" "${args[@]}" ;;
  esac >"$d/out" 2>"$d/err" || { echo "bench/rate-instr.sh: $m $METHOD $s B failed (see $d/err)" >&2; return 1; }
}
# count DIR: "role total locked isend irecv waitall" per rank, from the
# dump of the measured windows (cg.PID.1); the sender is the one that calls MPI_Isend
count() {
  for f in "$1"/cg.*.1; do
    python3 bench/mpi/callgrind_count.py "$f" MPI_Isend MPI_Irecv MPI_Waitall |
      awk '$1=="total"{t=$2} $1=="locked"{l=$2} $1=="fn"{v[$2]=$3}
           END {print (v["MPI_Isend"] > 0 ? "send" : "recv"), t, l, v["MPI_Isend"], v["MPI_Irecv"], v["MPI_Waitall"]}'
  done
}

if [ "$RATE_LOOP" = latency ]; then
  echo "load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC'), $METHOD, $N one-way messages counted, thread ${RI_THREAD:-single}"
  echo
  echo "| MPI | size | sender instr/msg | sender locked/msg | MPI_Send | receiver instr/msg | receiver locked/msg | MPI_Irecv + MPI_Wait | empty MPI_Test |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for m in $MPIS; do
    name=$m; [ "$m" = gw ] && name=$LABEL; [ "$m" = mpich ] && name=MPICH; [ "$m" = ompi ] && name="Open MPI"
    for s in $SIZES; do
      run "$m" "$s" || { echo "| $name | $s B | failed | | | | | | |"; continue; }
      for f in "$W/$m.$METHOD.$s"/cg.*.1; do
        python3 bench/mpi/callgrind_count.py "$f" MPI_Send MPI_Irecv MPI_Wait MPI_Test |
          awk '$1=="total"{t=$2} $1=="locked"{l=$2} $1=="fn"{v[$2]=$3}
               END {print (v["MPI_Send"] > 0 ? "send" : "recv"), t, l, v["MPI_Send"], v["MPI_Irecv"] + v["MPI_Wait"], v["MPI_Test"]}'
      done | awk -v msgs="$N" -v name="$name" -v s="$s" '
        { t[$1]=$2; l[$1]=$3; a[$1]=$4; b[$1]=$5; c[$1]=$6 }
        END {
          printf "| %s | %s B | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f |\n", name, s,
            t["send"]/msgs, l["send"]/msgs, a["send"]/msgs, t["recv"]/msgs, l["recv"]/msgs, b["recv"]/msgs, c["recv"]/msgs/8
        }'
    done
  done
  exit 0
fi
echo "load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC'), $METHOD, $N windows of 64 counted, thread ${RI_THREAD:-single}"
echo
echo "| MPI | size | sender instr/msg | sender locked/msg | receiver instr/msg | receiver locked/msg | MPI_Isend/call | MPI_Irecv/call | sender MPI_Waitall/msg | receiver MPI_Waitall/msg |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in $MPIS; do
  name=$m; [ "$m" = gw ] && name=$LABEL; [ "$m" = mpich ] && name=MPICH; [ "$m" = ompi ] && name="Open MPI"
  for s in $SIZES; do
    run "$m" "$s" || { echo "| $name | $s B | failed | | | | | | | |"; continue; }
    count "$W/$m.$METHOD.$s" | awk -v msgs="$((64 * N))" -v name="$name" -v s="$s" '
      { t[$1]=$2; l[$1]=$3; i[$1]=$4; r[$1]=$5; w[$1]=$6 }
      END {
        printf "| %s | %s B | %.0f | %.2f | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f |\n", name, s,
          t["send"]/msgs, l["send"]/msgs, t["recv"]/msgs, l["recv"]/msgs,
          i["send"]/msgs, r["recv"]/msgs, w["send"]/msgs, w["recv"]/msgs
      }'
  done
done
