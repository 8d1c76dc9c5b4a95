#!/usr/bin/env bash
# The PVM face against Debian's PVM 3.4.6 on one host (issue 17): timing.c
# (round trip of a minimal message, then pack time and round trip at 100 B
# to 1 MB, PvmDataRaw, PvmRouteDirect) and bwtest.c (round trip and
# bandwidth of pvm_pkdouble messages of 0 to 800 KB packed PvmDataInPlace)
# from Debian's pvm-examples, compiled unchanged against gridwire's pvm3.h
# and against Debian's. Each figure is the median of RUNS runs (default 3).
# Prints a markdown table; `make bench` saves it as bench/out/pvm.md. Then
# bench/pvm-2hosts.sh: the same across two gw-testbed hosts.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
RUNS=${RUNS:-3}
lib=${PVM_LIB:-$root/target/release}
[ -e "$lib/libpvm3.so" ] || cargo build -q --release -p gridwire-pvm
for need in gcc pvm; do command -v $need >/dev/null || { echo "bench/pvm.sh: $need is not installed" >&2; exit 1; }; done
[ -r /usr/share/doc/pvm-examples/examples.tar.gz ] || { echo "bench/pvm.sh: pvm-examples is not installed" >&2; exit 1; }

T=$(mktemp -d /tmp/gwpvm-bench.XXXXXX)
mkdir -p "$T/src" "$T/gwlib"
tar -xzf /usr/share/doc/pvm-examples/examples.tar.gz -C "$T/src"
# timing.c stops at 1 MB; the issue asks for 4 MB too. timing4m is timing.c
# with only its size loop changed (to the one size 4 MB), built and run the
# same way; only its 4 MB row is used.
sed 's/for (numint = 25; numint < 1000000; numint \*= 10)/for (numint = 1000000; numint <= 1000000; numint *= 10)/' \
  "$T/src/examples/timing.c" >"$T/src/examples/timing4m.c"
grep -q 'numint = 1000000;' "$T/src/examples/timing4m.c" || { echo "bench/pvm.sh: cannot derive timing4m.c from timing.c" >&2; exit 1; }
# Pack/unpack of PvmDataDefault against PVM's XDR: a program of ours.
cp bench/c/pvm_pack.c "$T/src/examples/pvm_pack.c"
ln -s "$lib/libpvm3.so" "$T/gwlib/libpvm3.so"
ln -s "$lib/libpvm3.so" "$T/gwlib/libgpvm3.so"
export PVM_ALLOW_ROOT=1 PVM_ROOT=/usr/lib/pvm3
gw_env=(HOME=$T/gw/home GWPVM_DIR=$T/gw/vm GWPVM_IDLE_EXIT=300)
deb_env=(HOME=$T/deb/home PVM_TMP=$T/deb/tmp)
cleanup() {
  env "${gw_env[@]}" timeout 10 "$lib/gwpvm" halt >/dev/null 2>&1
  (echo halt | env "${deb_env[@]}" timeout 10 pvm) >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
for side in gw deb; do
  bin=$T/$side/home/pvm3/bin/LINUX64
  mkdir -p "$bin" "$T/$side/tmp"
  for p in timing timing4m timing_slave bwtest pvm_pack; do
    if [ $side = gw ]; then
      gcc -O2 -w -I"$root/include" -o "$bin/$p" "$T/src/examples/$p.c" -L"$T/gwlib" -lgpvm3 -lpvm3 -Wl,-rpath,"$T/gwlib"
    else
      gcc -O2 -w -o "$bin/$p" "$T/src/examples/$p.c" -lgpvm3 -lpvm3
    fi || { echo "bench/pvm.sh: $side: $p.c does not compile" >&2; exit 1; }
  done
done
ln -sf "$(command -v pvmgs)" "$T/deb/home/pvm3/bin/LINUX64/pvmgs"   # Debian's group server
(echo quit | env "${deb_env[@]}" timeout 20 pvm) >/dev/null 2>&1

median() { sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
for side in gw deb; do
  envs=("${gw_env[@]}"); [ $side = deb ] && envs=("${deb_env[@]}")
  cd "$T/$side/home/pvm3/bin/LINUX64"
  for r in $(seq "$RUNS"); do
    # GW_VERBOSE=1: the master's context names the method it reached the
    # slave by ("reached by shm"); Debian's PVM ignores the variable.
    env "${envs[@]}" GW_VERBOSE=1 timeout 120 ./timing >"$T/$side.timing.$r" 2>&1
    env "${envs[@]}" timeout 120 ./timing4m >"$T/$side.timing4m.$r" 2>&1
    env "${envs[@]}" timeout 120 ./pvm_pack >"$T/$side.pack.$r" 2>&1
    # bwtest: two instances of one program pair up through a group.
    env "${envs[@]}" timeout 120 ./bwtest >"$T/$side.bw2.$r" 2>&1 &
    env "${envs[@]}" timeout 120 ./bwtest >"$T/$side.bw1.$r" 2>&1
    wait
    cat "$T/$side.bw1.$r" "$T/$side.bw2.$r" >"$T/$side.bwtest.$r"
  done
  cd "$root"
done

# timing: "RTT Avg uSec N"; per size, the line after "Avg uSec" is "pack rtt".
rtt() { for r in $(seq "$RUNS"); do awk '/^RTT Avg uSec/ {print $4}' "$T/$1.timing.$r"; done | median; }
tsize() { # side bytes field(1 pack, 2 round trip)
  for r in $(seq "$RUNS"); do
    cat "$T/$1.timing.$r" "$T/$1.timing4m.$r" 2>/dev/null |
      awk -v s="$2" -v f="$3" '/^Message size/ {cur=$3} /^Avg uSec/ {getline; if (cur==s) print $f}'
  done | median
}
bw() { # side bytes -> MB/s
  for r in $(seq "$RUNS"); do
    awk -v s="$2" '/Roundtrip T =/ && $NF==s {gsub(/[()]/,"",$6); print $6}' "$T/$1.bwtest.$r"
  done | median
}
bwt() { # side bytes -> round trip us
  for r in $(seq "$RUNS"); do
    awk -v s="$2" '/Roundtrip T =/ && $NF==s {print $4}' "$T/$1.bwtest.$r"
  done | median
}
. bench/pvm-tables.sh   # cwd is the repository (cd above)

echo "### PVM: gridwire's libpvm3 vs Debian's PVM 3.4.6 (one host, median of $RUNS runs)"
echo
method=$(cat "$T"/gw.timing.* 2>/dev/null | grep -o "reached by [a-z+]*" | sort | uniq -c | sort -rn | head -1 | awk '{print $4}')
echo "gridwire's method between master and slave (timing.c): ${method:-unknown}"
echo
pvm_tables
echo
# pvm_pack.c: "pack|unpack <type> <bytes> <ns>" lines.
packns() { for r in $(seq "$RUNS"); do awk -v w="$2" -v t="$3" -v b="$4" '$1==w && $2==t && $3==b {print $4}' "$T/$1.pack.$r"; done | median; }
echo "pvm_pack.c (bench/c; PvmDataDefault: PVM packs XDR, gridwire its own representation with type tags): ns per call, median of 41 calls, median of the runs"
echo
echo "| data | gridwire pack | PVM pack | ratio (gw/PVM) | gridwire unpack | PVM unpack | ratio (gw/PVM) |"
echo "|---|---|---|---|---|---|---|"
for b in 100 10000 1000000; do
  for ty in int double; do
    gp=$(packns gw pack $ty $b); dp=$(packns deb pack $ty $b)
    gu=$(packns gw unpack $ty $b); du=$(packns deb unpack $ty $b)
    echo "| $b B of $ty | $gp | $dp | $(ratio "$gp" "$dp") | $gu | $du | $(ratio "$gu" "$du") |"
  done
done
echo
# The same programs across two testbed hosts (needs root: SKIPPED otherwise).
RUNS=$RUNS bash "$root/bench/pvm-2hosts.sh"
