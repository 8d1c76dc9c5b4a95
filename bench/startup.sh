#!/usr/bin/env bash
# `make bench-startup` (also run by `make bench`): start-up of a `hello` MPI
# program across the hosts of gw-testbed (issue 12), for `gwrun -f`, MPICH's
# Hydra (`mpiexec.mpich -launcher ssh -f`) and Open MPI (`mpirun --hostfile`),
# front end on `login`, one rank per host.
#
#   sizes:    1 site x 4, 16, 32 hosts and 2 sites x 8 hosts, 20 ms one-way
#             WAN delay, --shared-fs (Hydra and Open MPI need the program on
#             every host; gwrun then finds it and stages nothing but its proxy).
#   figures:  wall time from launch until the launcher exits (= every rank
#             has finished MPI_Finalize and the launcher has collected it),
#             median of STARTUP_RUNS (5) interleaved runs after one warm-up run
#             per launcher (the warm-up fills the page cache and, for gwrun,
#             each host's proxy cache; its figure is reported too). Every run
#             is cold for ssh: the testbed's ssh config says ControlMaster no.
#             CPU seconds of the front end: user+system of the launcher and
#             every descendant it waited for (ssh clients included), from
#             /usr/bin/time (getrusage of children) run on login.
#             Connections: one extra run under `strace -f` counting the TCP
#             connections of the front end's process tree: connect() to a
#             non-loopback address (ssh to a host) plus accept() of a
#             connection from a non-loopback address (a proxy calling back).
#   firewall: 2 sites x 4 hosts with --firewall s1: does each launcher start
#             the job? (one run each, bounded by a timeout; failures recorded),
#             Hydra and Open MPI also with the testbed's ssh config minus its
#             ProxyJump lines (no route to the inner hosts).
#   staging:  2 sites x 4 hosts, --wan-rate 100 (Mbit/s), no --shared-fs:
#             gwrun's first run (stages proxy, program and libmpi.so), a warm
#             run, then one with a 50 MB incompressible file in --stage-files;
#             its extra time against bytes x remote sites / WAN rate.
#   round trips: 2 sites x 2 hosts at one-way WAN delays STARTUP_RTT_LO (5)
#             and STARTUP_RTT_HI (45) ms, STARTUP_RTT_RUNS (3) interleaved runs:
#             WAN round trips waited for in series = the wall-time difference
#             over the round-trip-time difference (STARTUP_RTT= skips it).
#   failures: gwrun only, a 4-rank sleep job on 2 sites x 2 hosts: seconds
#             from kill -9 of a remote rank, kill -9 of a remote proxy, and a
#             silent partition (GW_HEARTBEAT_TIMEOUT 2 and 10) until gwrun
#             has exited (STARTUP_FAILURES= skips it).
#   STARTUP_FIREWALL= and STARTUP_STAGING= skip those parts.
# Needs root (gw-testbed); without it, or without MPICH/Open MPI, the part
# that cannot run says why. Markdown on stdout (also bench/out/startup/
# startup.md), progress on stderr. STARTUP_RUNS, STARTUP_SIZES ("1x4 1x16
# 1x32 2x8"; empty: only firewall and staging), STARTUP_WAN_DELAY (ms),
# STARTUP_TIMEOUT (s), REL (target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REL=${REL:-target/release}
REL=$(cd "$REL" && pwd)
RUNS=${STARTUP_RUNS:-5}
SIZES=${STARTUP_SIZES-"1x4 1x16 1x32 2x8"}   # STARTUP_SIZES= (empty): only the firewall and staging parts
DELAY=${STARTUP_WAN_DELAY:-20}
TIMEOUT=${STARTUP_TIMEOUT:-120}
TB=$REL/gw-testbed
OUT=bench/out/startup
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/startup.sh: gw-testbed needs root" >&2; exit 0; fi
if ! why=$(GW_LINKEMU=$REL/gw-linkemu "$TB" check 2>&1); then
    echo "SKIPPED: bench/startup.sh: gw-testbed check: $why" >&2; exit 0
fi
# Same priority rule as bench/run.sh (a shared machine measures its neighbours).
echo -20 >"/proc/$$/autogroup" 2>/dev/null || true
renice -n -20 -p $$ >/dev/null 2>&1 || true

# Programs where every host sees them under --shared-fs (hosts have their own
# /tmp, /root and /run).
WORK=/var/tmp/gw-bench-startup-$$
mkdir -p "$WORK"
IDS=()
cleanup() {
    local id
    for id in "${IDS[@]}"; do "$TB" down --id "$id" >/dev/null 2>&1 || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

GW_MPI_LIBDIR=$REL scripts/gwcc -O2 -o "$WORK/hello_gw" bench/c/hello.c
have_mpich=0; have_ompi=0
command -v mpiexec.mpich >/dev/null && have_mpich=1
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null &&
    mpicc.openmpi -O2 -o "$WORK/hello_ompi" bench/c/hello.c && have_ompi=1
# A gridwire program also starts under mpirun.openmpi (PMIx): tried once per
# size and reported, the Open MPI figures are Open MPI's own hello.

seq_id=0
# up OPTIONS…: brings a testbed up, sets its GW_TESTBED_* variables.
up() {
    seq_id=$((seq_id + 1))
    local id="bs$$x$seq_id" env
    id=${id:0:12}
    IDS+=("$id")
    env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$id" "$@" 2>"$OUT/up-$id.err") || {
        echo "gw-testbed up $* failed: $(tail -3 "$OUT/up-$id.err")" >&2; return 1; }
    eval "$env"
}
down() { "$TB" down --id "$GW_TESTBED_ID" >/dev/null 2>&1 || true; }

# launcher_cmd L N: the command line of launcher L for N ranks, one per host.
launcher_cmd() {
    local l=$1 n=$2
    case $l in
        gw) echo "$REL/gwrun -f $GW_TESTBED_MACHINES -n $n --timeout $TIMEOUT $WORK/hello_gw" ;;
        hy) echo "mpiexec.mpich -launcher ssh -launcher-exec $GW_TESTBED_BIN/ssh -f $GW_TESTBED_HOSTFILE -wdir /tmp -n $n $WORK/hello_gw" ;;
        om) echo "mpirun.openmpi --allow-run-as-root --oversubscribe --map-by node --hostfile $GW_TESTBED_HOSTFILE -mca plm_rsh_agent $GW_TESTBED_BIN/ssh --wdir /tmp -n $n $WORK/hello_ompi" ;;
        gwom) echo "mpirun.openmpi --allow-run-as-root --oversubscribe --map-by node --hostfile $GW_TESTBED_HOSTFILE -mca plm_rsh_agent $GW_TESTBED_BIN/ssh --wdir /tmp -n $n $WORK/hello_gw" ;;
    esac
}
# on_login CMD…: runs CMD on login with the testbed's ssh wrappers first in PATH.
on_login() {
    "$TB" exec --id "$GW_TESTBED_ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" \
        MPIEXEC_TIMEOUT="$TIMEOUT" timeout -k 5 "$((TIMEOUT + 10))" "$@"
}
# timed L N: one run; prints "wall user sys status ranks" (ranks = hello lines).
timed() {
    local l=$1 n=$2 t=$WORK/time status ranks
    rm -f "$t"
    # shellcheck disable=SC2046
    on_login /usr/bin/time -f '%e %U %S' -o "$t" $(launcher_cmd "$l" "$n") >"$WORK/out" 2>"$WORK/err" && status=0 || status=$?
    ranks=$(grep -c '^hello ' "$WORK/out" || true)
    if [ "$status" != 0 ] || [ "$ranks" != "$n" ]; then
        echo "  $l on $n hosts: status $status, $ranks of $n ranks said hello: $(tail -2 "$WORK/err" | tr '\n' ' ' | cut -c1-300)" >&2
    fi
    # /usr/bin/time prints "Command exited with non-zero status N" first on failure.
    local times
    times=$(grep -E '^[0-9.]+ [0-9.]+ [0-9.]+$' "$t" 2>/dev/null | tail -1 || true)
    printf '%s %s %s\n' "${times:-nan nan nan}" "$status" "$ranks"
}
# connections L N: TCP connections of the front end's process tree (see top).
connections() {
    local l=$1 n=$2 s=$WORK/strace
    # shellcheck disable=SC2046
    on_login strace -f -qq -e trace=connect,accept,accept4 -o "$s" $(launcher_cmd "$l" "$n") >/dev/null 2>&1 || true
    awk '
      /connect\(/ && /AF_INET/ && !/127\.0\.0\.1|"::1"|ECONNREFUSED|ENETUNREACH|EHOSTUNREACH/ { c++ }
      /accept4?\(/ && /= [0-9]+$/ && !/127\.0\.0\.1|"::1"/ { a++ }
      END { printf "%d + %d\n", c, a }' "$s"
}
median() { sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

launchers="gw"
[ $have_mpich = 1 ] && launchers+=" hy"
[ $have_ompi = 1 ] && launchers+=" om"
declare -A WALL CPU CONN FIRST FAILS
rows=()
for size in $SIZES; do
    sites=${size%x*}; hosts=${size#*x}; n=$((sites * hosts))
    echo "bench: start-up, $sites site(s) x $hosts hosts" >&2
    up --sites "$sites" --hosts "$hosts" --wan-delay "$DELAY" --shared-fs || continue
    res=$WORK/res-$size
    : >"$res"
    for l in $launchers; do
        r=$(timed "$l" "$n"); FIRST[$size.$l]=$r
    done
    for _ in $(seq "$RUNS"); do
        for l in $launchers; do echo "$l $(timed "$l" "$n")" >>"$res"; done
    done
    for l in $launchers; do
        ok=$(awk -v l="$l" -v n="$n" '$1==l && $5==0 && $6==n' "$res" | wc -l)
        FAILS[$size.$l]=$((RUNS - ok))
        WALL[$size.$l]=$(awk -v l="$l" -v n="$n" '$1==l && $5==0 && $6==n {print $2}' "$res" | median)
        CPU[$size.$l]=$(awk -v l="$l" -v n="$n" '$1==l && $5==0 && $6==n {print $3+$4}' "$res" | median)
        CONN[$size.$l]=$(connections "$l" "$n")
    done
    gwom=n/a
    if [ $have_ompi = 1 ]; then
        r=$(timed gwom "$n"); set -- $r
        if [ "$4" = 0 ] && [ "$5" = "$n" ]; then gwom="started, $1 s"; else gwom="failed (status $4, $5 of $n ranks)"; fi
    fi
    cp "$res" "$OUT/runs-$size.txt"
    rows+=("$size $n $gwom")
    down
done

# Firewall: s1 reachable only through its gateway s1h0.
echo "bench: start-up with --firewall s1" >&2
declare -A FW
TIMEOUT_ALL=$TIMEOUT
TIMEOUT=${STARTUP_FIREWALL_TIMEOUT:-40}
if [ -n "${STARTUP_FIREWALL-yes}" ] && up --sites 2 --hosts 4 --wan-delay "$DELAY" --shared-fs --firewall s1; then
    for l in $launchers; do
        r=$(timed "$l" 8); set -- $r
        if [ "$4" = 0 ] && [ "$5" = 8 ]; then FW[$l]="starts ($1 s)"
        else FW[$l]="fails: status $4, $5 of 8 ranks said hello: $(tail -1 "$WORK/err" | cut -c1-160 | tr '|' '/')"; fi
    done
    # The testbed's ssh config reaches s1h1-3 by ProxyJump through s1h0; a
    # site whose users have no such route: the same config without it.
    nj=$WORK/nojump
    mkdir -p "$nj"
    awk '/^Host / { host = $0; next } host != "" { h = host; host = ""; if ($1 == "ProxyJump") next; print h } { print }' \
        "$GW_TESTBED_SSH_CONFIG" >"$nj/config"
    printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$nj/config" >"$nj/ssh"
    chmod +x "$nj/ssh"
    tb_bin=$GW_TESTBED_BIN
    GW_TESTBED_BIN=$nj
    for l in $launchers; do
        [ "$l" = gw ] && continue
        r=$(timed "$l" 8); set -- $r
        if [ "$4" = 0 ] && [ "$5" = 8 ]; then FW[nj.$l]="starts ($1 s)"
        else FW[nj.$l]="fails: status $4, $5 of 8 ranks said hello: $(tail -1 "$WORK/err" | cut -c1-160 | tr '|' '/')"; fi
    done
    GW_TESTBED_BIN=$tb_bin
    down
fi

TIMEOUT=$TIMEOUT_ALL
# Staging over a 100 Mbit/s WAN, no shared file system.
echo "bench: staging" >&2
STAGE_MB=50
RATE=100
big=$WORK/blob.bin
head -c $((STAGE_MB * 1000 * 1000)) /dev/urandom >"$big"
st_cold=n/a; st_warm=n/a; st_big=n/a; st_ok=no
if [ -n "${STARTUP_STAGING-yes}" ] && up --sites 2 --hosts 4 --wan-delay "$DELAY" --wan-rate "$RATE"; then
    set -- $(timed gw 8); st_cold=$1
    set -- $(timed gw 8); st_warm=$1
    # shellcheck disable=SC2046
    on_login /usr/bin/time -f '%e %U %S' -o "$WORK/time" "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n 8 \
        --timeout "$TIMEOUT" --stage-files "$big" "$WORK/hello_gw" >"$WORK/out" 2>"$WORK/err" && st_ok=yes ||
        echo "  staging run failed: $(tail -2 "$WORK/err")" >&2
    st_big=$(tail -1 "$WORK/time" | awk '{print $1}')
    down
fi
libsz=$(stat -c %s "$REL/libmpi.so"); progsz=$(stat -c %s "$WORK/hello_gw"); proxysz=$(stat -c %s "$REL/gwrun")
floor=$(awk -v b=$((STAGE_MB * 1000 * 1000)) -v r=$RATE 'BEGIN { printf "%.2f", b * 8 * 2 / (r * 1e6) }')
extra=$(awk -v a="$st_big" -v b="$st_warm" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.2f", a - b }')

# WAN round trips on the critical path: the same start-up at two WAN
# delays; the wall time grows by one round-trip time per round trip the
# launcher waits for in series, so (T(hi) - T(lo)) / (RTT(hi) - RTT(lo))
# counts them (the machine's noise cancels in the difference, not in
# either figure).
RTT_LO=${STARTUP_RTT_LO:-5}
RTT_HI=${STARTUP_RTT_HI:-45}
RTT_RUNS=${STARTUP_RTT_RUNS:-3}
declare -A RT_T
if [ -n "${STARTUP_RTT-yes}" ]; then
    for d in "$RTT_LO" "$RTT_HI"; do
        echo "bench: WAN round trips, 2 sites x 2 hosts, one-way delay $d ms" >&2
        up --sites 2 --hosts 2 --wan-delay "$d" --shared-fs || continue
        res=$WORK/rt-$d
        : >"$res"
        for l in $launchers; do timed "$l" 4 >/dev/null; done
        for _ in $(seq "$RTT_RUNS"); do
            for l in $launchers; do echo "$l $(timed "$l" 4)" >>"$res"; done
        done
        for l in $launchers; do
            RT_T[$d.$l]=$(awk -v l="$l" '$1==l && $5==0 && $6==4 {print $2}' "$res" | median)
        done
        cp "$res" "$OUT/roundtrips-$d.txt"
        down
    done
fi
round_trips() {
    awk -v a="${RT_T[$RTT_HI.$1]:-n/a}" -v b="${RT_T[$RTT_LO.$1]:-n/a}" -v hi="$RTT_HI" -v lo="$RTT_LO" \
        'BEGIN { if (a == "n/a" || b == "n/a" || a == "" || b == "") print "n/a"; else printf "%.1f", (a - b) / (2 * (hi - lo) / 1000) }'
}

# Failure detection (gwrun only): a 4-rank `sleep` job on 2 sites x 2 hosts;
# kill -9 of the rank on a remote host, kill -9 of a remote proxy, and a
# silent partition of a host (GW_HEARTBEAT_TIMEOUT=2 and the default 10 s):
# seconds from the event until gwrun has exited (the job torn down on every
# host).
declare -A FAIL_T
# sleepers ENV…: starts the job in the background on login; sets SLEEPERS_PID.
sleepers() {
    "$TB" exec --id "$GW_TESTBED_ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" "$@" \
        "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n 4 --timeout 120 sleep 300 >/dev/null 2>"$WORK/fail-err" &
    SLEEPERS_PID=$!
    local i
    for i in $(seq 200); do
        [ "$("$TB" exec --id "$GW_TESTBED_ID" s1h1 pgrep -x sleep | wc -l)" = 1 ] && return 0
        sleep 0.1
    done
    echo "  the sleeping job did not start on s1h1: $(tail -2 "$WORK/fail-err")" >&2
    return 1
}
# ended_after T0: waits for the job, prints seconds since T0 (date +%s.%N).
# Not in a command substitution: a subshell cannot wait for our child.
ended_after() {
    wait "$SLEEPERS_PID" 2>/dev/null || true
    ENDED=$(awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN { printf "%.2f", a - b }')
}
if [ -n "${STARTUP_FAILURES-yes}" ] && up --sites 2 --hosts 2 --wan-delay "$DELAY"; then
    echo "bench: failure detection" >&2
    if sleepers; then
        t0=$(date +%s.%N); "$TB" exec --id "$GW_TESTBED_ID" s1h1 pkill -9 -x sleep
        ended_after "$t0"; FAIL_T[rank]=$ENDED
    fi
    if sleepers; then
        t0=$(date +%s.%N); "$TB" exec --id "$GW_TESTBED_ID" s1h1 pkill -9 -f -- --proxy
        ended_after "$t0"; FAIL_T[proxy]=$ENDED
    fi
    for hb in 2 10; do
        if sleepers GW_HEARTBEAT_TIMEOUT=$hb; then
            t0=$(date +%s.%N); "$TB" partition --id "$GW_TESTBED_ID" s1h1
            ended_after "$t0"; FAIL_T[hb$hb]=$ENDED
            "$TB" heal --id "$GW_TESTBED_ID" s1h1
        fi
    done
    down
fi

load=$(cut -d' ' -f1-3 /proc/loadavg)
name() { case $1 in gw) echo "gwrun -f" ;; hy) echo "Hydra" ;; om) echo "Open MPI" ;; esac; }
{
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC'), \`bash bench/startup.sh\` ($(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); load after: $load), at commit $(git rev-parse --short HEAD)"
    echo
    echo "Median of $RUNS interleaved runs after one warm-up run per launcher; one-way WAN delay $DELAY ms; \`--shared-fs\`; one rank per host; front end on \`login\`. Wall: launch until the launcher exits. CPU: user+system seconds of the launcher and its waited-for descendants (ssh clients). Connections: TCP connections of the front end's process tree, opened + accepted (strace -f, one extra run). Raw runs: bench/out/startup/."
    echo
    echo "| sites × hosts | launcher | wall (s) | first run (s) | front-end CPU (s) | connections | failed runs |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
    for row in "${rows[@]}"; do
        size=${row%% *}
        for l in $launchers; do
            echo "| ${size/x/ × } | $(name "$l") | ${WALL[$size.$l]} | $(awk '{print $1}' <<<"${FIRST[$size.$l]}") | ${CPU[$size.$l]} | ${CONN[$size.$l]} | ${FAILS[$size.$l]} |"
        done
    done
    echo
    echo "| sites × hosts | wall gwrun/Hydra | wall gwrun/Open MPI | CPU gwrun/Hydra | CPU gwrun/Open MPI | gridwire hello under mpirun.openmpi (PMIx) |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    for row in "${rows[@]}"; do
        read -r size _ gwom <<<"$row"
        echo "| ${size/x/ × } | $(ratio "${WALL[$size.gw]}" "${WALL[$size.hy]:-}") | $(ratio "${WALL[$size.gw]}" "${WALL[$size.om]:-}") | $(ratio "${CPU[$size.gw]}" "${CPU[$size.hy]:-}") | $(ratio "${CPU[$size.gw]}" "${CPU[$size.om]:-}") | $gwom |"
    done
    echo
    echo "Firewall (2 sites × 4 hosts, \`--firewall s1\`: only s1h0 reachable from outside s1; the testbed's ssh config reaches s1h1-3 by ProxyJump through s1h0):"
    echo
    for l in $launchers; do echo "- $(name "$l"): ${FW[$l]:-n/a}"; done
    for l in $launchers; do
        [ "$l" = gw ] || echo "- $(name "$l") with the same ssh config minus its ProxyJump lines: ${FW[nj.$l]:-n/a}"
    done
    echo
    echo "WAN round trips on the critical path of start-up (2 sites × 2 hosts, \`--shared-fs\`, median of $RTT_RUNS interleaved runs at one-way WAN delays of $RTT_LO and $RTT_HI ms; round trips = (wall at $RTT_HI ms − wall at $RTT_LO ms) ÷ the $((2 * (RTT_HI - RTT_LO))) ms difference in round-trip time):"
    echo
    echo "| launcher | wall at $RTT_LO ms (s) | wall at $RTT_HI ms (s) | WAN round trips |"
    echo "| --- | ---: | ---: | ---: |"
    for l in $launchers; do echo "| $(name "$l") | ${RT_T[$RTT_LO.$l]:-n/a} | ${RT_T[$RTT_HI.$l]:-n/a} | $(round_trips "$l") |"; done
    echo
    echo "Failure detection (gwrun -f, 4-rank \`sleep\` job on 2 sites × 2 hosts, $DELAY ms WAN; seconds from the event until gwrun exited, the job torn down on every host): kill -9 of the rank on s1h1 ${FAIL_T[rank]:-n/a} s (goal ≤ 2); kill -9 of s1h1's proxy ${FAIL_T[proxy]:-n/a} s (goal ≤ 2); silent partition of s1h1 with GW_HEARTBEAT_TIMEOUT=2 ${FAIL_T[hb2]:-n/a} s, with the default 10 s ${FAIL_T[hb10]:-n/a} s (goal: ≤ 5 s beyond the timeout)."
    echo
    echo "Staging (2 sites × 4 hosts, \`--wan-rate $RATE\` Mbit/s per WAN arm, login's included, $DELAY ms, no \`--shared-fs\`): gwrun's first run ${st_cold} s (sends its proxy, $proxysz B, the program, $progsz B, and libmpi.so, $libsz B, once per site); warm run ${st_warm} s; with \`--stage-files\` of $STAGE_MB MB from /dev/urandom ${st_big} s (completed: $st_ok), ${extra} s more than the warm run, against $floor s = $STAGE_MB MB × 2 remote sites ÷ $RATE Mbit/s: ratio $(ratio "$extra" "$floor") (goal ≤ 1.2)."
} | tee "$OUT/startup.md"
