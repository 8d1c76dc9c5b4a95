#!/usr/bin/env bash
# Point-to-point rows of bench/mpi/osu.c (latency, latency_touch, bw, bibw)
# for gridwire under several parameter settings, beside MPICH and Open MPI,
# all runs interleaved (noise falls on all alike); prints, per figure and
# size, the median of RUNS runs of each and each setting's ratio to the
# better of the two peers in this run (times: below 1 is better; bandwidths:
# above 1). Not a test.
#
#   bench/p2p-ab.sh LABEL=VAR=VALUE,VAR=VALUE ... (an empty list: defaults)
#   e.g. bench/p2p-ab.sh off=GW_SHM_PLACE_MIN=1g on=
# Env: RUNS (default 5), OSU_MS (default 60), FIGS (default
#      "latency latency_touch bw bibw"), HOSTS=2 for tcp (gwrun
#      --emulate-hosts 2; MPICH with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self,
#      Open MPI with --mca pml ob1 --mca btl tcp,self, as bench/mpi.sh);
#      PEERS=0 to leave the peers out; CARGO_TARGET_DIR.
# One host: every MPI's two ranks pinned one per core (bench/mpi.sh's shm
# settings); tcp: unpinned, as bench/mpi.sh's tcp rows.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/p2p-ab.sh LABEL=VAR=VALUE,... ..." >&2; exit 2; }
T=${CARGO_TARGET_DIR:-target}
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
W=$T/bench-p2p
mkdir -p "$W"
export OSU_MS=${OSU_MS:-60} MPIEXEC_TIMEOUT=300
FIGS=${FIGS:-latency latency_touch bw bibw}
HOSTS=${HOSTS:-1}
CARGO_TARGET_DIR=$T cargo build -q --release -p gridwire-capi -p gridwire-launch >&2 || exit 1
GW_MPI_LIBDIR=$T/release scripts/gwcc -O2 -o "$W/osu_gw" bench/mpi/osu.c || exit 1
peers=
if [ "${PEERS:-1}" = 1 ]; then
  command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -Wno-stringop-overflow -o "$W/osu_mpich" bench/mpi/osu.c && peers="$peers mpich"
  command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$W/osu_ompi" bench/mpi/osu.c && peers="$peers ompi"
fi
run() { # LABEL [SETTINGS]
  case $1 in
    mpich) if [ "$HOSTS" = 2 ]; then MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 "$W/osu_mpich" $FIGS
           else mpiexec.mpich -bind-to core -n 2 "$W/osu_mpich" $FIGS; fi ;;
    ompi) if [ "$HOSTS" = 2 ]; then mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self -n 2 "$W/osu_ompi" $FIGS
          else mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to core -n 2 "$W/osu_ompi" $FIGS; fi ;;
    *) local -a envs=()
       IFS=',' read -r -a envs <<<"${2:-}"
       if [ "$HOSTS" = 2 ]; then env "${envs[@]}" "$T/release/gwrun" -n 2 --emulate-hosts 2 --timeout 300 "$W/osu_gw" $FIGS
       else env "${envs[@]}" "$T/release/gwrun" -n 2 --bind-to core --timeout 300 "$W/osu_gw" $FIGS; fi ;;
  esac
}
raw=$W/raw.txt
: >"$raw"
echo "bench/p2p-ab.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), RUNS=${RUNS:-5} OSU_MS=$OSU_MS HOSTS=$HOSTS FIGS=\"$FIGS\"" >&2
labels=()
for r in $(seq "${RUNS:-5}"); do
  for a in "$@" $peers; do
    label=${a%%=*}; settings=; [ "$a" != "$label" ] && settings=${a#*=}
    [ "$r" = 1 ] && labels+=("$label")
    timeout 400 bash -c "$(declare -f run); W='$W' T='$T' FIGS='$FIGS' HOSTS='$HOSTS'; run '$label' '$settings'" 2>"$W/$label.err" |
      grep -E '^[a-z_]+ [0-9]+ [0-9.]+$' | sed "s/^/$label /" >>"$raw"
  done
  echo "bench/p2p-ab.sh: run $r done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
echo "bench/p2p-ab.sh: end $(date -u '+%H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# medians, then one table per figure: label columns, peers, ratios to the better peer
python3 - "$raw" "${labels[@]}" <<'PY'
import sys, statistics, collections
raw, labels = sys.argv[1], sys.argv[2:]
v = collections.defaultdict(list)
for line in open(raw):
    lab, fig, size, val = line.split()
    v[(lab, fig, int(size))].append(float(val))
med = {k: statistics.median(x) for k, x in v.items()}
peers = [p for p in ("mpich", "ompi") if p in labels]
mine = [l for l in labels if l not in peers]
def human(s):
    return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"
for fig in ("lat", "lat_touch", "bw", "bibw"):
    sizes = sorted({k[2] for k in med if k[1] == fig})
    if not sizes:
        continue
    time = fig.startswith("lat")
    print(f"\n{fig} ({'µs' if time else 'MB/s'}, medians of {max(len(x) for x in v.values())})\n")
    print("| size | " + " | ".join(mine + peers) + " | " + " | ".join(f"{l} / better peer" for l in mine) + " |")
    print("| ---: " * (1 + len(mine) + len(peers) + len(mine)) + "|")
    for s in sizes:
        g = lambda l: med.get((l, fig, s))
        pv = [g(p) for p in peers if g(p) is not None]
        best = (min(pv) if time else max(pv)) if pv else None
        cells = [f"{g(l):.3f}" if g(l) is not None else "" for l in mine + peers]
        rat = [f"{g(l) / best:.2f}" if g(l) and best else "" for l in mine]
        print(f"| {human(s)} | " + " | ".join(cells + rat) + " |")
PY
