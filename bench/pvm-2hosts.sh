#!/usr/bin/env bash
# The PVM face across two real hosts (issue 17), run by bench/pvm.sh:
# timing.c and bwtest.c from Debian's pvm-examples, compiled unchanged
# against gridwire's pvm3.h and against Debian's, on a gw-testbed of one
# site with two hosts (s0h0, s0h1; shared file system, LAN without a rate
# limit). Debian's PVM 3.4.6: its pvmd started on s0h0 by the console with
# a host file naming s0h1, whose pvmd PVM starts over ssh (PVM_RSH); as
# root, through a wrapper that sets PVM_ALLOW_ROOT there. gridwire: `gwpvm
# add s0h1` (the coordinator starts the host agent over ssh, from the
# testbed's machines file). timing's slave goes where each system's default
# placement puts it (the other host, for both: checked); bwtest's second
# instance is started by hand on s0h1, joining the machine there. Each
# figure is the median of RUNS runs. Prints Markdown; needs root (testbed).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
RUNS=${RUNS:-3}
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
REL=$target/release
if [ "$(id -u)" != 0 ]; then echo "SKIPPED: bench/pvm-2hosts.sh: gw-testbed needs root" >&2; exit 0; fi
cargo build -q --release -p gridwire-pvm -p gridwire-linkemu -p gridwire-testbed || exit 1
TB=$REL/gw-testbed
export GW_LINKEMU=$REL/gw-linkemu
if ! why=$("$TB" check 2>&1); then echo "SKIPPED: bench/pvm-2hosts.sh: gw-testbed check: $why" >&2; exit 0; fi

# The hosts see /var/tmp (shared file system), not each other's /tmp.
W=$(mktemp -d /var/tmp/gwpvm-bench2.XXXXXX)
id=pb$$; id=${id:0:12}
cleanup() {
  [ -n "${hx:-}" ] && {
    $hx s0h0 env GWPVM_DIR= "$REL/gwpvm" halt >/dev/null 2>&1
    $hx s0h0 sh -c 'echo halt | PVM_ROOT=/usr/lib/pvm3 PVM_ALLOW_ROOT=1 timeout 10 pvm' >/dev/null 2>&1
  }
  "$TB" down --id "$id" >/dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
env=$("$TB" up --id "$id" --sites 1 --hosts 2 --shared-fs 2>"$W/up.err") || { echo "bench/pvm-2hosts.sh: gw-testbed up: $(tail -3 "$W/up.err")" >&2; exit 1; }
eval "$env"
hx="$TB exec --id $id"
cp "$GW_TESTBED_MACHINES" "$W/machines"

mkdir -p "$W/src" "$W/gw" "$W/deb"
tar -xzf /usr/share/doc/pvm-examples/examples.tar.gz -C "$W/src"
# timing4m: timing.c with its size loop changed to the one size 4 MB (see bench/pvm.sh).
sed 's/for (numint = 25; numint < 1000000; numint \*= 10)/for (numint = 1000000; numint <= 1000000; numint *= 10)/' \
  "$W/src/examples/timing.c" >"$W/src/examples/timing4m.c"
grep -q 'numint = 1000000;' "$W/src/examples/timing4m.c" || { echo "bench/pvm-2hosts.sh: cannot derive timing4m.c" >&2; exit 1; }
for p in timing timing4m timing_slave bwtest; do
  gcc -O2 -w -I"$root/include" -o "$W/gw/$p" "$W/src/examples/$p.c" -L"$REL" -lpvm3 -Wl,-rpath,"$REL" &&
  gcc -O2 -w -o "$W/deb/$p" "$W/src/examples/$p.c" -lgpvm3 -lpvm3 || { echo "bench/pvm-2hosts.sh: $p.c does not compile" >&2; exit 1; }
done
ln -s "$(command -v pvmgs)" "$W/deb/pvmgs"
printf '#!/bin/sh\nexport PVM_ROOT=/usr/lib/pvm3 PVM_ALLOW_ROOT=1\nexec /usr/lib/pvm3/lib/pvmd "$@"\n' >"$W/pvmd-root"
chmod +x "$W/pvmd-root"
printf '* ep=%s dx=%s\ns0h0\ns0h1\n' "$W/deb" "$W/pvmd-root" >"$W/hostfile"
deb=(env PVM_ROOT=/usr/lib/pvm3 PVM_ALLOW_ROOT=1 PVM_RSH="$GW_TESTBED_BIN/ssh")
gw=(env GWPVM_MACHINES="$W/machines" GWPVM_IDLE_EXIT=300)

# Debian's virtual machine: the console starts pvmd on s0h0 and s0h1.
$hx s0h0 sh -c "cd $W/deb && echo conf | ${deb[*]} timeout 60 pvm $W/hostfile" >"$W/deb.conf" 2>&1
grep -q s0h1 "$W/deb.conf" || { echo "bench/pvm-2hosts.sh: PVM did not add s0h1:" >&2; cat "$W/deb.conf" >&2; exit 1; }
# gridwire's: the first program started the coordinator; gwpvm adds s0h1.
$hx s0h0 "${gw[@]}" "$REL/gwpvm" add s0h1 >"$W/gw.conf" 2>&1 || { echo "bench/pvm-2hosts.sh: gwpvm add s0h1 failed:" >&2; cat "$W/gw.conf" >&2; exit 1; }

# Whether run R of SIDE had PROG's (timing's, timing4m's) slave on the other
# host: PVM names the host in the task id (t8xxxx: s0h1), gridwire's context
# names its method.
slave_remote_run() {
  local p=${3:-timing}
  if [ $1 = deb ]; then grep -q "slave is task t8" "$W/deb.$p.$2"
  else grep -q "reached by tcp" "$W/gw.$p.err.$2" && ! grep -q "reached by shm" "$W/gw.$p.err.$2"; fi
}
for side in gw deb; do
  if [ $side = gw ]; then e=("${gw[@]}" GW_VERBOSE=1); else e=("${deb[@]}"); fi
  for r in $(seq "$RUNS"); do
    # The slave must be on the other host. PVM's default placement goes
    # round the hosts with every spawn in the machine (its group server's
    # too), so a run may land it on s0h0: such a run is repeated (at most 3).
    for p in timing timing4m; do
      for try in 1 2 3; do
        $hx s0h0 sh -c "cd $W/$side && ${e[*]} timeout 120 ./$p" >"$W/$side.$p.$r" 2>"$W/$side.$p.err.$r"
        slave_remote_run $side $r $p && break
        echo "bench/pvm-2hosts.sh: $side run $r try $try: $p's slave was on s0h0, again" >&2
      done
    done
    $hx s0h0 sh -c "cd $W/$side && ${e[*]} timeout 120 ./bwtest" >"$W/$side.bw1.$r" 2>&1 &
    sleep 0.5
    $hx s0h1 sh -c "cd $W/$side && ${e[*]} timeout 120 ./bwtest" >"$W/$side.bw2.$r" 2>&1
    wait
    cat "$W/$side.bw1.$r" "$W/$side.bw2.$r" >"$W/$side.bwtest.$r"
  done
done
# The slave on the other host in every run of both.
slave_remote() { for r in $(seq "$RUNS"); do slave_remote_run $1 $r && slave_remote_run $1 $r timing4m || return 1; done; }
method=$(grep -ho "reached by [a-z]*" "$W"/gw.timing.err.* | sort | uniq -c | sort -rn | head -1 | awk '{print $4}')

median() { sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
rtt() { for r in $(seq "$RUNS"); do awk '/^RTT Avg uSec/ {print $4}' "$W/$1.timing.$r"; done | median; }
tsize() { for r in $(seq "$RUNS"); do
    cat "$W/$1.timing.$r" "$W/$1.timing4m.$r" 2>/dev/null |
      awk -v s="$2" -v f="$3" '/^Message size/ {cur=$3} /^Avg uSec/ {getline; if (cur==s) print $f}'
  done | median; }
bw() { for r in $(seq "$RUNS"); do
    awk -v s="$2" '/Roundtrip T =/ && $NF==s {gsub(/[()]/,"",$6); print $6}' "$W/$1.bwtest.$r"; done | median; }
bwt() { for r in $(seq "$RUNS"); do awk -v s="$2" '/Roundtrip T =/ && $NF==s {print $4}' "$W/$1.bwtest.$r"; done | median; }
. bench/pvm-tables.sh   # cwd is the repository (cd above)

echo "### PVM across two testbed hosts (s0h0 → s0h1), median of $RUNS runs"
echo
echo "gridwire's method between the hosts: ${method:-unknown}; timing's slave on the other host: gridwire $(slave_remote gw && echo yes || echo no), PVM $(slave_remote deb && echo yes || echo no)"
echo
pvm_tables
