#!/usr/bin/env bash
# The PVM face against Debian's PVM 3.4.6 (issue 17): C sources of Debian's
# pvm-examples (extracted from the package at test time), and two programs
# of ours (tests/c: a task killed mid-job triggers pvm_notify; every pack
# type between two tasks), each compiled unchanged twice: against
# include/pvm3.h + libpvm3 (gridwire) and against Debian's pvm3.h + libpvm3.
# Both builds run here, each in its own virtual machine (gridwire's
# coordinator in a private GWPVM_DIR; Debian's pvmd started by this script
# in a private PVM_TMP, halted after), and their outputs must be equal once
# normalised (tests/normalize.py: task ids, host name, times, line order).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$root/scripts/test-lib.sh"
GW_TEST_NAME=pvm-examples
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac

ex_tar=/usr/share/doc/pvm-examples/examples.tar.gz
gex_tar=/usr/share/doc/pvm-examples/gexamples.tar.gz
for need in gcc python3 pvm; do
  command -v $need >/dev/null || { skip_or_fail "$need is not installed (scripts/install-deps.sh installs it)"; exit $?; }
done
[ -r "$ex_tar" ] && [ -r "$gex_tar" ] || { skip_or_fail "pvm-examples is not installed"; exit $?; }
[ -r /usr/include/pvm3.h ] || { skip_or_fail "pvm-dev is not installed"; exit $?; }
(cd "$root" && cargo build -q -p gridwire-pvm) || { echo "FAILED: cannot build gridwire-pvm"; exit 1; }
lib=$target/debug
[ -e "$lib/libpvm3.so" ] || { echo "FAILED: $lib/libpvm3.so was not built"; exit 1; }

T=$(mktemp -d /tmp/gwpvm-test.XXXXXX)
gwlib=$T/gwlib
mkdir -p "$gwlib" "$T/src"
ln -s "$lib/libpvm3.so" "$gwlib/libpvm3.so"
ln -s "$lib/libpvm3.so" "$gwlib/libgpvm3.so"
tar -xzf "$ex_tar" -C "$T/src"
tar -xzf "$gex_tar" -C "$T/src"
cp "$here"/c/*.c "$T/src/examples/"

export PVM_ALLOW_ROOT=1 PVM_ROOT=/usr/lib/pvm3
gw_env=(HOME=$T/gw/home GWPVM_DIR=$T/gw/vm GWPVM_IDLE_EXIT=120)
deb_env=(HOME=$T/deb/home PVM_TMP=$T/deb/tmp)
cleanup() {
  env "${gw_env[@]}" timeout 10 "$lib/gwpvm" halt >/dev/null 2>&1
  (echo halt | env "${deb_env[@]}" timeout 10 pvm) >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT

# program | sources (the first is the one run) | stdin words | libraries | arguments
progs=(
  "hello|examples/hello.c examples/hello_other.c||"
  "master1|examples/master1.c examples/slave1.c||"
  "spmd|examples/spmd.c||"
  "gexample|examples/gexample.c|100 4|-lgpvm3"
  "inherita|examples/inherita.c examples/inherit1.c examples/inherit2.c examples/inherit3.c|||inherit1"
  "inheritb|examples/inheritb.c examples/inherit2.c||"
  "tst|gexamples/tst.c||-lgpvm3"
  "joinleave|gexamples/joinleave.c||-lgpvm3|200"
  "thb|gexamples/thb.c gexamples/tnb.c||-lgpvm3|3"
  "gexamp|gexamples/gexamp.c||-lgpvm3|4"
  "trsg|gexamples/trsg.c|4 8|-lgpvm3"
  "notify_kill|examples/notify_kill.c||"
  "packtypes|examples/packtypes.c||"
  "mbox_test|examples/mbox_test.c||"
  "packf_test|examples/packf_test.c|||valid"
  "catchout_test|examples/catchout_test.c||"
  "msgapi_test|examples/msgapi_test.c||"
  "nameserv_test|examples/nameserv_test.c||"
)
for side in gw deb; do
  bin=$T/$side/home/pvm3/bin/LINUX64
  mkdir -p "$bin" "$T/$side/tmp" "$T/$side/out"
  for p in "${progs[@]}"; do
    IFS='|' read -r name srcs input libs args <<<"$p"
    for s in $srcs; do
      exe=$(basename "$s" .c)
      if [ $side = gw ]; then
        cc=(gcc -w -I"$root/include" -o "$bin/$exe" "$T/src/$s" -L"$gwlib" $libs -lpvm3 -Wl,-rpath,"$gwlib")
      else
        cc=(gcc -w -o "$bin/$exe" "$T/src/$s" $libs -lpvm3)
      fi
      "${cc[@]}" 2>"$T/$side/out/$exe.cc" || { echo "FAILED: $side: $s does not compile:"; cat "$T/$side/out/$exe.cc"; exit 1; }
    done
  done
done

# Debian's group server is spawned like any task: from the task path.
ln -sf "$(command -v pvmgs || echo /usr/lib/pvm3/bin/LINUX64/pvmgs)" "$T/deb/home/pvm3/bin/LINUX64/pvmgs"
(echo quit | env "${deb_env[@]}" timeout 20 pvm) >"$T/deb/out/pvmd-start" 2>&1
grep -q "pvmd still running" "$T/deb/out/pvmd-start" || { echo "FAILED: Debian's pvmd did not start:"; cat "$T/deb/out/pvmd-start"; exit 1; }

fail=0
for p in "${progs[@]}"; do
  IFS='|' read -r name srcs input libs args <<<"$p"
  for side in gw deb; do
    envs=("${gw_env[@]}"); [ $side = deb ] && envs=("${deb_env[@]}")
    t0=$(date +%s%N)
    (cd "$T/$side/home/pvm3/bin/LINUX64" && printf '%s\n' $input | env "${envs[@]}" timeout 60 "./$name" $args) >"$T/$side/out/$name" 2>"$T/$side/out/$name.err"
    echo "$? $(( ($(date +%s%N) - t0) / 1000000 ))" >"$T/$side/out/$name.rc"
    python3 "$here/normalize.py" "$T/$side/out/$name" >"$T/$side/out/$name.norm"
  done
  read -r rc_gw ms_gw <"$T/gw/out/$name.rc"
  read -r rc_deb ms_deb <"$T/deb/out/$name.rc"
  if [ "$rc_gw" = 124 ]; then
    echo "FAILED: $name: timed out under gridwire"; fail=1
  elif [ "$rc_gw" != "$rc_deb" ]; then
    echo "FAILED: $name: exit status $rc_gw under gridwire, $rc_deb under Debian's PVM"; fail=1
  elif ! diff -u "$T/deb/out/$name.norm" "$T/gw/out/$name.norm" >"$T/$name.diff"; then
    echo "FAILED: $name: output differs from Debian's PVM (- Debian, + gridwire):"; cat "$T/$name.diff"; fail=1
  elif [ ! -s "$T/gw/out/$name.norm" ]; then
    echo "FAILED: $name printed nothing"; fail=1
  else
    echo "ok: $name ($(wc -l <"$T/gw/out/$name.norm") lines equal; gridwire ${ms_gw} ms, PVM ${ms_deb} ms)"
  fi
  if [ $fail = 1 ] && [ -s "$T/gw/out/$name.err" ]; then
    echo "  gridwire stderr:"; sed 's/^/    /' "$T/gw/out/$name.err" | head -20
  fi
done
# The notify test must also have said what it checks, under both.
{ grep -q "notified: tag 77, the killed child" "$T/gw/out/notify_kill" && grep -q "pvm_sendsig -> 0; notified: yes" "$T/gw/out/notify_kill" && grep -q "pvm_kill -> 0; notified: yes" "$T/gw/out/notify_kill"; } || { echo "FAILED: notify_kill: no notification for the killed task"; fail=1; }
# pvm_getfds: gridwire's descriptor becomes readable when a message waits
# (msgapi_test says so on stderr; Debian's pvmd socket does not here).
grep -q "readable once the child answers: yes" "$T/gw/out/msgapi_test.err" || { echo "FAILED: msgapi_test: pvm_getfds' descriptor did not become readable for a waiting message"; fail=1; }
# pvm_packf/pvm_unpackf with malformed formats (gridwire only: Debian's
# PVM is not asked to survive them): every one PvmBadParam, no crash.
(cd "$T/gw/home/pvm3/bin/LINUX64" && env "${gw_env[@]}" timeout 30 ./packf_test) >"$T/packf.out" 2>&1
cat >"$T/packf.expected" <<'EXPECTED'
packf("%q") -> -2
packf("%") -> -2
packf("%99999999999d") -> -2
packf("%.0d") -> -2
packf("%hld") -> -2
packf("%lc") -> -2
packf("%uf") -> -2
packf("%hs") -> -2
packf("%3") -> -2
packf("%*d", -1) -> -2
packf(NULL) -> -2
unpackf("%+") -> -2
EXPECTED
if grep '^packf(\|^unpackf(' "$T/packf.out" | diff -u "$T/packf.expected" - >"$T/packf.diff" \
   && grep -q "^unpackf -> 0" "$T/packf.out"; then
  echo "ok: packf_test (12 malformed formats refused with PvmBadParam)"
else
  echo "FAILED: packf_test with malformed formats:"; cat "$T/packf.diff" "$T/packf.out"; fail=1
fi
# Hosts added at run time (gridwire only): an emulated host, its task
# reached by a network method (not shared memory), notifies on add/delete.
hbin=$T/gw/home/pvm3/bin/LINUX64
gcc -w -I"$root/include" -o "$hbin/hosts_test" "$here/c/hosts_test.c" -L"$gwlib" -lpvm3 -Wl,-rpath,"$gwlib" || { echo "FAILED: hosts_test.c does not compile"; fail=1; }
(cd "$hbin" && env "${gw_env[@]}" GW_VERBOSE=1 timeout 60 ./hosts_test) >"$T/hosts.out" 2>"$T/hosts.err"
cat >"$T/hosts.expected" <<'EXPECTED'
hosts at start: 1
addhosts -> 1, info 80000
host-add notify: 1 host(s), 80000
hosts now: 2
mstat emu1 -> 0
adding it again -> -28
child says its host is 80000; pvm_tidtohost says 80000
spawn on a host not in the machine -> -6
delhosts -> 1
host-delete notify: 80000; its task exited: yes
hosts at end: 1
EXPECTED
# The task on the emulated host logs (GW_VERBOSE=1) how it reached its
# parent: it must be a network method, not shared memory.
if diff -u "$T/hosts.expected" "$T/hosts.out" >"$T/hosts.diff" && grep -Eq "reached by (tcp|udp)" "$T/gw/vm/log" \
   && ! grep -q "reached by shm" "$T/gw/vm/log"; then
  echo "ok: hosts_test (emulated host added and deleted at run time; its task reached by $(grep -Eo "reached by (tcp|udp)" "$T/gw/vm/log" | head -1 | cut -d' ' -f3))"
else
  echo "FAILED: hosts_test:"; cat "$T/hosts.diff"; grep "reached by" "$T/gw/vm/log"; fail=1
fi
# The console: spawn four spmd tasks (siblings of each other, as PVM's
# `spawn -4 spmd`); their ring's output lands in the virtual machine's log.
: >"$T/gw/vm/log"
if (cd "$T/gw/home" && env "${gw_env[@]}" timeout 30 "$lib/gwpvm" spawn -4 spmd) >"$T/console.out" 2>&1 \
   && grep -q "^4 successful" "$T/console.out"; then
  for _ in $(seq 100); do grep -q "token ring done" "$T/gw/vm/log" && break; sleep 0.1; done
  if grep -q "Pass a token through the   4 tid ring" "$T/gw/vm/log" && grep -q "token ring done" "$T/gw/vm/log" \
     && env "${gw_env[@]}" "$lib/gwpvm" ps | grep -q "HOST.*TID.*COMMAND"; then
    echo "ok: gwpvm spawn -4 spmd runs a 4-task ring; gwpvm ps answers"
  else
    echo "FAILED: gwpvm spawn -4 spmd: the ring did not complete:"; cat "$T/gw/vm/log"; fail=1
  fi
else
  echo "FAILED: gwpvm spawn:"; cat "$T/console.out"; fail=1
fi
# The console's host commands: add two emulated hosts, see them in conf,
# refuse a duplicate, delete one.
c() { env "${gw_env[@]}" timeout 20 "$lib/gwpvm" "$@" 2>&1; }
add=$(c add nodeA nodeB); dup=$(c add nodeA); conf1=$(c conf); del=$(c delete nodeA); conf2=$(c conf)
if grep -q "^2 successful" <<<"$add" && grep -q "^0 successful" <<<"$dup" && grep -qi "dup" <<<"$dup" \
   && grep -q "^3 hosts" <<<"$conf1" && grep -q " nodeA " <<<"$conf1" && grep -q " nodeB " <<<"$conf1" \
   && grep -q "^1 successful" <<<"$del" && grep -q "^2 hosts" <<<"$conf2" && ! grep -q " nodeA " <<<"$conf2"; then
  echo "ok: gwpvm add/delete/conf change and show the hosts (duplicates refused)"
else
  echo "FAILED: gwpvm add/delete/conf:"; printf '%s\n---\n' "$add" "$dup" "$conf1" "$del" "$conf2"; fail=1
fi
c delete nodeB >/dev/null
# Stale coordinator file (a coordinator that died): the next task replaces it.
vm=$T/gw/vm
env "${gw_env[@]}" "$lib/gwpvm" halt >/dev/null 2>&1
sleep 0.3
mkdir -p "$vm" && chmod 700 "$vm"
echo "999999 gwpvmstale $(printf '%064d' 0)" >"$vm/coord"
: >"$vm/sock" 2>/dev/null || true
if (cd "$T/gw/home/pvm3/bin/LINUX64" && env "${gw_env[@]}" timeout 30 ./hello) >"$T/stale.out" 2>&1 \
   && grep -q "hello, world" "$T/stale.out" && ! grep -q gwpvmstale "$vm/coord"; then
  echo "ok: a stale coordinator file is replaced"
else
  echo "FAILED: a stale coordinator file blocked the start:"; cat "$T/stale.out"; fail=1
fi
[ -n "${KEEP:-}" ] && trap - EXIT && echo "kept $T"
[ $fail = 0 ] && echo "pvm examples: all equal to Debian's PVM 3.4.6"
exit $fail
