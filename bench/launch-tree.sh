#!/usr/bin/env bash
# How gwrun -f starts one big site, against Hydra (issue 12): the plain site
# tree (GW_LAUNCH_DIRECT=0), the flat start (GW_LAUNCH_TREE=flat: one ssh per
# host from the front end), a warm site with GW_LAUNCH_DIRECT hosts started
# beside the leader (the default; docs/grid.md), and Hydra
# (`mpiexec.mpich -launcher ssh`). gw-testbed: 1 site x LT_HOSTS (16) hosts,
# 20 ms one-way WAN delay, --shared-fs, front end on login, one rank per host.
# One untimed round first (it also makes the site warm), then LT_RUNS (5)
# interleaved timed rounds; prints each configuration's median and every run
# in seconds, wall time from launch until the launcher exits. LT_CONFIGS
# picks configurations ("tree flat direct hydra"; directK: GW_LAUNCH_DIRECT=K).
# Needs root; says SKIPPED
# otherwise. Not part of `make bench` (bench/startup.sh is): a tool for
# choosing the launch tree.
set -uo pipefail
cd "$(dirname "$0")/.."
REL=$(cd "${REL:-target/release}" && pwd)
TB=$REL/gw-testbed
H=${LT_HOSTS:-16}
RUNS=${LT_RUNS:-5}
CONFIGS=${LT_CONFIGS:-tree flat direct hydra}
if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/launch-tree.sh: gw-testbed needs root" >&2; exit 0; fi
WORK=$(mktemp -d /var/tmp/gw-launch-tree.XXXXXX)
ID="lt$$"; ID=${ID:0:12}
trap '"$TB" down --id "$ID" >/dev/null 2>&1; rm -rf "$WORK"' EXIT
GW_MPI_LIBDIR=$REL scripts/gwcc -O2 -o "$WORK/hello_gw" bench/c/hello.c || exit 1
env=$(GW_LINKEMU=$REL/gw-linkemu "$TB" up --id "$ID" --sites 1 --hosts "$H" --wan-delay 20 --shared-fs 2>"$WORK/up.err") ||
    { echo "bench/launch-tree.sh: gw-testbed up failed: $(tail -3 "$WORK/up.err")" >&2; exit 1; }
eval "$env"
# The front end's cache (warm markers, hashes) is private to this run.
export XDG_CACHE_HOME=$WORK/cache
run() {
    local s e
    s=$(date +%s.%N)
    "$TB" exec --id "$ID" login env "PATH=$GW_TESTBED_BIN:/usr/bin:/bin" XDG_CACHE_HOME="$XDG_CACHE_HOME" "$@" \
        >"$WORK/out" 2>"$WORK/err" || echo "bench/launch-tree.sh: failed: $* $(tail -2 "$WORK/err")" >&2
    e=$(date +%s.%N)
    echo "$e - $s" | bc
}
declare -A R
for i in $(seq 0 "$RUNS"); do
    for c in $CONFIGS; do
        case $c in
            tree) t=$(run env GW_LAUNCH_DIRECT=0 "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n "$H" "$WORK/hello_gw") ;;
            flat) t=$(run env GW_LAUNCH_TREE=flat "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n "$H" "$WORK/hello_gw") ;;
            direct) t=$(run "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n "$H" "$WORK/hello_gw") ;;
            direct[0-9]*) t=$(run env "GW_LAUNCH_DIRECT=${c#direct}" "$REL/gwrun" -f "$GW_TESTBED_MACHINES" -n "$H" "$WORK/hello_gw") ;;
            hydra) t=$(run mpiexec.mpich -launcher ssh -launcher-exec "$GW_TESTBED_BIN/ssh" -f "$GW_TESTBED_HOSTFILE" -wdir /tmp -n "$H" "$WORK/hello_gw") ;;
            *) echo "bench/launch-tree.sh: unknown configuration $c" >&2; exit 2 ;;
        esac
        [ "$i" = 0 ] || R[$c]="${R[$c]:-} $t"
    done
done
echo "1 site x $H hosts, 20 ms, $RUNS rounds, load $(cut -d' ' -f1-3 /proc/loadavg):"
for c in $CONFIGS; do
    echo "$c: median $(echo "${R[$c]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}') s, runs:${R[$c]}"
done
