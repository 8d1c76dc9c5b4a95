#!/bin/bash
# Start-up of gwrun -f with the site tree (one ssh per site, the leader
# starts its site's hosts) against GW_LAUNCH_TREE=flat (the front end
# starts every host), on a testbed of 1 site x H hosts: median of 5
# interleaved runs of `hostname` on every host, caches warm (one run each
# first). Needs root. Usage: [SITES=S WAN=MS] bench/launch-tree.sh [H ...]
# (default 16 32 hosts per site; 1 site; no WAN delay).
set -eu
R=${R:-target/release}
ROOT=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16 32)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
SITES=${SITES:-1}
WAN=${WAN:-0}
printf '| sites x hosts (WAN ms) | site tree (s) | flat (s) | flat / tree |\n|---|---|---|---|\n'
for h in "${sizes[@]}"; do
    env_out=$("$R/gw-testbed" up --sites "$SITES" --hosts "$h" --wan-delay "$WAN" 2>/dev/null)
    n=$((SITES * h))
    eval "$env_out"
    trap '"$R/gw-testbed" down --id "$GW_TESTBED_ID" >/dev/null 2>&1' EXIT
    run() {
        local t0 t1
        t0=$(date +%s.%N)
        "$R/gw-testbed" exec --id "$GW_TESTBED_ID" login env GW_LAUNCH_TREE="$1" \
            "$ROOT/$R/gwrun" -f "$GW_TESTBED_MACHINES" -n "$n" --timeout 120 hostname >/dev/null
        t1=$(date +%s.%N)
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
    }
    run site >/dev/null; run flat >/dev/null
    tree=(); flat=()
    for _ in 1 2 3 4 5; do tree+=("$(run site)"); flat+=("$(run flat)"); done
    mt=$(printf '%s\n' "${tree[@]}" | median); mf=$(printf '%s\n' "${flat[@]}" | median)
    printf '| %d x %d (%s) | %.3f | %.3f | %.2f |\n' "$SITES" "$h" "$WAN" "$mt" "$mf" "$(awk -v a="$mf" -v b="$mt" 'BEGIN { print a / b }')"
    "$R/gw-testbed" down --id "$GW_TESTBED_ID" >/dev/null 2>&1
    trap - EXIT
done
