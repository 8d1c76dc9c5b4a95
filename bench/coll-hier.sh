#!/usr/bin/env bash
# Hierarchical against flat collectives across sites (issue 14), also run by
# `make bench`: bench/c/coll_lat.c (osu-style: each call started at an agreed time, per
# call the slowest rank's time, the median over the calls) on gw-testbed,
# COLLH_SITES (4) sites x 2 hosts x 2 ranks, COLLH_DELAY (10) ms one-way WAN
# delay, front end on `login`, for each placement of COLLH_PLACEMENTS:
#   site: ranks site by site (block: 0-3 at s0, 4-7 at s1, ...);
#   rr:   ranks round-robin over the hosts in file order (gwrun --map-by
#         host, Hydra one slot per host, Open MPI --map-by node): rank r on
#         host r mod 8, so consecutive ranks are on different hosts and
#         every other one at another site.
# Implementations, on the same hosts:
#   gw-flat / gw-hier: one gridwire job (`gwrun -f`) running every operation
#             on a duplicate of MPI_COMM_WORLD with info gw_coll=flat, then on
#             one with gw_coll=hier (GW_ENCRYPT=never);
#   gw-site:  the same job on one site's 2 hosts x 2 ranks (hierarchical):
#             the operation's cost inside a site;
#   mpich:    the program built with mpicc.mpich, run by Hydra
#             (`mpiexec.mpich -launcher ssh`);
#   ompi:     the program built with mpicc.openmpi, run by
#             `mpirun.openmpi --allow-run-as-root --oversubscribe` with its
#             ssh launcher (plm_rsh_agent = the testbed's ssh wrapper).
# gw-hier-0: the same gridwire job (same hosts, placement, ranks) on a second
#             testbed whose WAN has no delay (COLLH_ZERO=0 leaves it out): what
#             the operation costs on this machine without the wide-area
#             latency, so gw-hier minus gw-hier-0 is what the WAN adds.
# gridwire's jobs run with GW_SPIN_US=0 (COLLH_GW_ENV to change): the
# testbed's hosts are namespaces sharing the machine's 2 cores, but each
# host has 2 ranks, so the runtime's automatic rule (spin 2 ms when every
# rank of the host has a core) would have 16 ranks spin on 2 cores; on real
# hosts the rule holds. MPICH and Open MPI poll as they always do.
# The testbed's hosts get COLLH_CC (reno) as their TCP congestion control,
# for every implementation alike: a loss-based one, as a stock Linux host
# runs (cubic is Linux's and Debian's default, but this kernel lets a
# network namespace default only to the algorithms of
# net.ipv4.tcp_allowed_congestion_control, here "reno bbr"; reno and cubic
# differ only after a loss, and these transfers lose nothing). This
# machine's own default, BBR, paces a leader-to-leader connection at the
# rate its small messages showed: a lone 64 KiB message between two sites
# 10 ms apart took 27-44 ms under BBR against 11-23 ms under reno or cubic
# (docs/benchmarks.md, run 7). COLLH_CC=system leaves the machine's default.
# COLLH_TCP_TUNING=1 also tunes the hosts' TCP for the WAN (gw-testbed up
# --tcp-tuning: no slow start after idle, initcwnd/initrwnd 64 on the route
# to other sites), for every implementation alike: what an administrator of
# real WAN hosts may do, not what a stock host does (default 0: stock).
# The one-way WAN delay is measured by ping in the same run. Goal column:
# 1.3 x one-way delay + gw-site (one wide-area latency on the critical path);
# "met" says whether gw-hier is within it (the goal covers Bcast, Reduce,
# Barrier and Allreduce up to 64 KiB). COLLH_ITERS (10) timed calls per
# figure after 2 untimed; sizes up to COLLH_MAXBYTES (1048576); COLLH_PEERS=0
# leaves MPICH and Open MPI out; COLLH_ENV adds VAR=VALUE words to every
# job's environment. Each call starts at an agreed time (coll_lat.c). Markdown on
# stdout (also bench/out/coll-hier/coll-hier.md), raw lines in runs.txt, and
# a plot (bench/plot-coll-hier.py → bench/out/coll-hier/coll-hier.svg).
# Needs root (gw-testbed); says SKIPPED and exits 0 without.
set -euo pipefail
cd "$(dirname "$0")/.."
REL=${REL:-target/release}
REL=$(cd "$REL" && pwd)
SITES=${COLLH_SITES:-4}
DELAY=${COLLH_DELAY:-10}
ITERS=${COLLH_ITERS:-10}
MAXB=${COLLH_MAXBYTES:-1048576}
PLACEMENTS=${COLLH_PLACEMENTS:-site rr}
PEERS=${COLLH_PEERS:-1}               # 0: gridwire only (no MPICH, Open MPI)
ZERO=${COLLH_ZERO:-1}                 # 0: no zero-delay yardstick
CC=${COLLH_CC:-reno}                  # hosts' TCP congestion control; system: leave it
TUNING=()                             # COLLH_TCP_TUNING=1: gw-testbed up --tcp-tuning
[ "${COLLH_TCP_TUNING:-0}" = 1 ] && TUNING=(--tcp-tuning)
GW_ENV=${COLLH_GW_ENV-GW_SPIN_US=0}
TIMEOUT=${COLLH_TIMEOUT:-400}
N=$((SITES * 4))
TB=$REL/gw-testbed
OUT=bench/out/coll-hier
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/coll-hier.sh: gw-testbed needs root" >&2; exit 0; fi
if ! why=$(GW_LINKEMU=$REL/gw-linkemu "$TB" check 2>&1); then
    echo "SKIPPED: bench/coll-hier.sh: gw-testbed check: $why" >&2; exit 0
fi
echo -20 >"/proc/$$/autogroup" 2>/dev/null || true
renice -n -20 -p $$ >/dev/null 2>&1 || true

WORK=/var/tmp/gw-bench-collh-$$
mkdir -p "$WORK"
ID="" ID0=""
cleanup() {
    [ -n "$ID" ] && "$TB" down --id "$ID" >/dev/null 2>&1 || true
    [ -n "$ID0" ] && "$TB" down --id "$ID0" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

GW_MPI_LIBDIR=$REL scripts/gwcc -O2 -o "$WORK/coll_lat_gw" bench/c/coll_lat.c
have_mpich=0 have_ompi=0
command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null &&
    mpicc.mpich -O2 -o "$WORK/coll_lat_mpich" bench/c/coll_lat.c && have_mpich=1
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null &&
    mpicc.openmpi -O2 -o "$WORK/coll_lat_ompi" bench/c/coll_lat.c && have_ompi=1

ID="ch$$"
ID=${ID:0:12}
env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID" --sites "$SITES" --hosts 2 --wan-delay "$DELAY" "${TUNING[@]}" --shared-fs 2>"$OUT/up.err") || {
    echo "bench/coll-hier.sh: gw-testbed up failed: $(tail -3 "$OUT/up.err")" >&2; exit 1; }
eval "$env"
# COLLH_ENV: more VAR=VALUE words for every job (e.g. GW_TCP_CONGESTION=cubic);
# JOB_ENV: words for one call (gridwire's GW_ENV).
on_login() {
    # shellcheck disable=SC2086
    "$TB" exec --id "$ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" GW_ENCRYPT=never ${COLLH_ENV:-} ${JOB_ENV:-} \
        MPIEXEC_TIMEOUT="$TIMEOUT" timeout -k 5 "$((TIMEOUT + 10))" "$@"
}
# Runs a job whose output goes to $1 and stops it once its last figure is
# in (MPICH's and Open MPI's jobs print everything and then may not end on
# the testbed: their daemons wait after MPI_Finalize).
run_until_done() {
    local out=$1 err=$2
    shift 2
    on_login "$@" >>"$out" 2>"$err" &
    local pid=$! last="coll alltoall $MAXB "
    while kill -0 "$pid" 2>/dev/null; do
        if grep -q "^$last" "$out" 2>/dev/null; then
            sleep 3
            kill "$pid" 2>/dev/null || true
            break
        fi
        sleep 1
    done
    wait "$pid" 2>/dev/null || true
    grep -q "^$last" "$out" || echo "bench: coll-hier: run incomplete: $(tail -2 "$err")" >&2
}
# The hosts' TCP congestion control (per network namespace).
set_cc() {
    [ "$CC" = system ] && return 0
    local id=$1 h
    for h in $(grep -E '^s[0-9]+h[0-9]+$' "$GW_TESTBED_HOSTFILE"); do
        "$TB" exec --id "$id" "$h" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" ||
            { echo "bench/coll-hier.sh: cannot set $CC on $h" >&2; exit 1; }
    done
}
set_cc "$ID"
# Two slots per host; one site alone for the in-site figure.
sed -E 's/^(s[0-9]+h[0-9]+)$/\1:2/' "$GW_TESTBED_MACHINES" >"$WORK/machines"
awk '/^\[site s1\]/ { exit } { print }' "$WORK/machines" >"$WORK/machines-s0"
grep -E '^s[0-9]+h[0-9]+$' "$GW_TESTBED_HOSTFILE" >"$WORK/hosts"
sed 's/$/:2/' "$WORK/hosts" >"$WORK/hostfile-mpich-site"
cp "$WORK/hosts" "$WORK/hostfile-mpich-rr"           # 1 slot each: Hydra wraps round-robin
sed 's/$/ slots=2/' "$WORK/hosts" >"$WORK/hostfile-ompi"

oneway=$("$TB" exec --id "$ID" s0h0 ping -c 5 -i 0.2 -q s1h0 2>/dev/null |
    awk -F/ '/^rtt|^round-trip/ { printf "%.2f", $5 / 2 }')
echo "bench: coll-hier: one-way WAN delay by ping ${oneway:-n/a} ms" >&2

res=$WORK/res
: >"$res"
echo "bench: coll-hier: gridwire inside one site" >&2
JOB_ENV=$GW_ENV on_login "$REL/gwrun" -f "$WORK/machines-s0" -n 4 --timeout "$TIMEOUT" \
    "$WORK/coll_lat_gw" any:gw-site "$ITERS" plain "$MAXB" >>"$res" 2>"$OUT/site.err" ||
    echo "bench: coll-hier: one-site run failed: $(tail -2 "$OUT/site.err")" >&2
for p in $PLACEMENTS; do
    case $p in
        site) gwmap=slot ommap=slot ;;
        rr) gwmap=host ommap=node ;;
        *) echo "bench/coll-hier.sh: unknown placement $p" >&2; exit 2 ;;
    esac
    echo "bench: coll-hier: $p: gridwire flat and hier, $SITES sites x 2 hosts x 2 ranks" >&2
    JOB_ENV=$GW_ENV on_login "$REL/gwrun" -f "$WORK/machines" --map-by "$gwmap" -n "$N" --timeout "$TIMEOUT" \
        "$WORK/coll_lat_gw" "$p:gw" "$ITERS" info "$MAXB" >>"$res" 2>"$OUT/gw-$p.err" ||
        echo "bench: coll-hier: $p: gridwire run failed: $(tail -2 "$OUT/gw-$p.err")" >&2
    if [ $have_mpich = 1 ] && [ "$PEERS" = 1 ]; then
        echo "bench: coll-hier: $p: MPICH (Hydra -launcher ssh)" >&2
        run_until_done "$WORK/mpich-$p" "$OUT/mpich-$p.err" mpiexec.mpich -launcher ssh \
            -launcher-exec "$GW_TESTBED_BIN/ssh" -f "$WORK/hostfile-mpich-$p" -wdir /tmp -n "$N" \
            "$WORK/coll_lat_mpich" "$p:mpich" "$ITERS" plain "$MAXB"
        cat "$WORK/mpich-$p" >>"$res"
    fi
    if [ $have_ompi = 1 ] && [ "$PEERS" = 1 ]; then
        echo "bench: coll-hier: $p: Open MPI (mpirun ssh launcher)" >&2
        run_until_done "$WORK/ompi-$p" "$OUT/ompi-$p.err" mpirun.openmpi --allow-run-as-root \
            --oversubscribe --map-by "$ommap" --hostfile "$WORK/hostfile-ompi" \
            -mca plm_rsh_agent "$GW_TESTBED_BIN/ssh" --wdir /tmp -n "$N" \
            "$WORK/coll_lat_ompi" "$p:ompi" "$ITERS" plain "$MAXB"
        cat "$WORK/ompi-$p" >>"$res"
    fi
done
if [ "$ZERO" = 1 ]; then
    # The same jobs without the WAN delay, on a testbed of their own (the
    # first one is taken down first: two would share the 2 cores).
    "$TB" down --id "$ID" >/dev/null 2>&1 || true
    ID=""
    ID0="${ID0:-c0$$}"
    ID0=${ID0:0:12}
    env0=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID0" --sites "$SITES" --hosts 2 --wan-delay 0 "${TUNING[@]}" --shared-fs 2>"$OUT/up0.err") || {
        echo "bench/coll-hier.sh: gw-testbed up (no delay) failed: $(tail -3 "$OUT/up0.err")" >&2; exit 1; }
    eval "$env0"
    set_cc "$ID0"
    sed -E 's/^(s[0-9]+h[0-9]+)$/\1:2/' "$GW_TESTBED_MACHINES" >"$WORK/machines0"
    for p in $PLACEMENTS; do
        case $p in site) gwmap=slot ;; rr) gwmap=host ;; esac
        echo "bench: coll-hier: $p: gridwire hier without WAN delay" >&2
        # shellcheck disable=SC2086
        "$TB" exec --id "$ID0" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" GW_ENCRYPT=never \
            GW_COLL=hier ${COLLH_ENV:-} $GW_ENV MPIEXEC_TIMEOUT="$TIMEOUT" timeout -k 5 "$((TIMEOUT + 10))" \
            "$REL/gwrun" -f "$WORK/machines0" --map-by "$gwmap" -n "$N" --timeout "$TIMEOUT" \
            "$WORK/coll_lat_gw" "$p:gw-hier-0" "$ITERS" plain "$MAXB" >>"$res" 2>"$OUT/gw0-$p.err" ||
            echo "bench: coll-hier: $p: zero-delay run failed: $(tail -2 "$OUT/gw0-$p.err")" >&2
    done
fi
cp "$res" "$OUT/runs.txt"
python3 bench/plot-coll-hier.py "$OUT/runs.txt" "${oneway:-0}" "$OUT/coll-hier.svg" >&2 ||
    echo "bench: coll-hier: plot failed" >&2

# One table per placement. The in-site figure for root = last rank is the
# 4-rank job's rank 3.
{
    echo "One-way WAN delay (ping): ${oneway:-n/a} ms; $SITES sites x 2 hosts x 2 ranks; $ITERS calls per figure; µs; hosts' TCP: $CC${TUNING:+, tuned (--tcp-tuning)}."
    for p in $PLACEMENTS; do
        echo
        echo "Placement \`$p\`:"
        echo
        echo "| op | bytes | root | gridwire flat | gridwire hier | MPICH | Open MPI | hier inside one site | goal: 1.3 x delay + one site | hier within goal | hier, no WAN delay | hier minus no delay, in delays |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
        awk -v ow="${oneway:-0}" -v p="$p" '
          $1 == "coll" { split($5, l, ":"); if (l[1] != p && l[1] != "any") next
                         key = $2 " " $3 " " ($4 == 0 ? "0" : "last"); v[key, l[2]] = $6
                         if (l[1] == p && !(key in seen)) { seen[key] = 1; order[n++] = key } }
          END {
            for (i = 0; i < n; i++) {
              key = order[i]; split(key, f, " ")
              site = v[key, "gw-site"]; hier = v[key, "gw-hier"]
              goal = site == "" ? "" : 1.3 * ow * 1000 + site
              met = ""
              if (goal != "" && hier != "" && f[1] ~ /^(bcast|reduce|barrier|allreduce)$/ && f[2] <= 65536)
                met = hier <= goal ? "yes" : "no"
              zero = v[key, "gw-hier-0"]
              added = (zero == "" || hier == "" || ow == 0) ? "" : sprintf("%.2f", (hier - zero) / (ow * 1000))
              printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3],
                v[key, "gw-flat"], hier, v[key, "mpich"], v[key, "ompi"], site,
                goal == "" ? "" : sprintf("%.0f", goal), met, zero, added
            }
          }' "$res"
    done
} | tee "$OUT/coll-hier.md"
