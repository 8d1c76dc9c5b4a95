#!/bin/bash
# mpi4py's PyPI binary wheel (built for MPICH's ABI, no compiler involved) on
# gridwire through the MPICH-ABI shim (issue 3), and an MPICH-compiled C program:
#
#   1. builds gridwire (cargo, the profile below) and the shim beside it
#      (compat/mpich-abi/build.sh -> $target/$profile/mpich-abi/libmpi.so.12);
#   2. MPICH-compiled programs (mpicc.mpich): tests/mpich_ring.c under
#      gwrun -n 4 and -n 3 on 2 emulated hosts, tests/mpich_mpi1.c (the
#      deprecated MPI-1 names) under gwrun -n 3, and the portable programs of
#      the C suite (tests/mpi/*.c) under gwrun -n 3;
#   3. a venv with `pip install --only-binary=:all: mpi4py==4.1.2 numpy`,
#      then wheel_check.py under `gwrun -n 4` with no environment set (gwrun
#      finds the shim and points mpi4py at it);
#   4. the modules of mpi4py's own test suite that pass with the wheel
#      (docs/mpi.md), under gwrun -n 2 (the suite comes from the sdist).
#
#   compat/mpich-abi/test-mpi4py-wheel.sh
#   MPICH_ABI_PROFILE=release ...      # gridwire's release build (default debug, as `make test`)
#   MPI4PY_WHEEL_TESTS="test_p2p_buf" ...; MPI4PY_WHEEL_TESTS=all ... (report only)
#
# Run by `make test` (compat/mpich-abi/tests/extra.sh). Exit 0 when all pass;
# 1 otherwise. A part that cannot run (PyPI unreachable, mpicc.mpich missing)
# follows the skip rule of scripts/test-lib.sh: under CI=true it fails, elsewhere
# it says "SKIPPED: reason". Any other pip failure is a failure everywhere.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/scripts/test-lib.sh"
GW_TEST_NAME=${GW_TEST_NAME:-compat/mpich-abi/test-mpi4py-wheel.sh}
# pip's words for "the index could not be reached" (and only those).
offline_re='Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|Read timed out|ProxyError|Could not fetch URL'
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
profile=${MPICH_ABI_PROFILE:-debug}
libdir=$target/$profile
gwrun=$libdir/gwrun
work=$target/mpi4py-wheel-test
mkdir -p "$work"
t0=$(date +%s)
fail=0
ver=4.1.2
# The modules that must pass with the wheel (mpi4py 4.1.2, 2 ranks): the
# same list as for mpi4py built from source (tests/mpi/mpi4py.sh).
must_pass=${MPI4PY_WHEEL_TESTS:-$(grep -v "^#" "$root/tests/mpi/mpi4py-must-pass.txt" | tr "\n" " ")}

# 1. gridwire and the shim.
(cd "$root" && cargo build $([ "$profile" = release ] && echo --release) -q -p gridwire-capi -p gridwire-launch) || exit 1
bash "$here/build.sh" "$libdir/mpich-abi" >"$work/build.log" 2>&1 \
    || { echo "FAIL building the shim; see $work/build.log"; tail -20 "$work/build.log"; exit 1; }
[ -x "$gwrun" ] || { echo "FAIL: $gwrun missing"; exit 1; }

# 2. An MPICH-compiled C program.
if command -v mpicc.mpich >/dev/null 2>&1; then
    if mpicc.mpich -O1 -Wno-stringop-overflow -o "$work/mpich_ring" "$here/tests/mpich_ring.c" >"$work/cc.log" 2>&1; then
        for args in "-n 4" "-n 3 --emulate-hosts 2"; do
            out=$(cd "$work" && timeout 90 "$gwrun" --timeout 60 $args ./mpich_ring 2>&1)
            rc=$?
            n=${args#-n }; n=${n%% *}
            if [ $rc -eq 0 ] && echo "$out" | grep -qx "mpich_ring ok $n"; then
                echo "ok   MPICH-compiled mpich_ring (gwrun $args)"
            else
                echo "FAIL MPICH-compiled mpich_ring (gwrun $args)"; echo "$out" | tail -10; fail=1
            fi
        done
    else
        echo "FAIL compiling tests/mpich_ring.c with mpicc.mpich; see $work/cc.log"; fail=1
    fi
    if mpicc.mpich -O1 -Wno-deprecated-declarations -o "$work/mpich_mpi1" "$here/tests/mpich_mpi1.c" >"$work/cc_mpi1.log" 2>&1; then
        out=$(cd "$work" && timeout 90 "$gwrun" --timeout 60 -n 3 ./mpich_mpi1 2>&1)
        if [ $? -eq 0 ] && echo "$out" | grep -qx "mpich_mpi1 ok 3"; then
            echo "ok   MPICH-compiled mpich_mpi1 (deprecated MPI-1 names; gwrun -n 3)"
        else
            echo "FAIL MPICH-compiled mpich_mpi1 (deprecated MPI-1 names; gwrun -n 3)"; echo "$out" | tail -10; fail=1
        fi
    else
        echo "FAIL compiling tests/mpich_mpi1.c with mpicc.mpich; see $work/cc_mpi1.log"; fail=1
    fi
    # The portable programs of gridwire's C suite (tests/mpi; the others use
    # MPI 4.1/5.0 functions MPICH 4.0's header lacks), built by MPICH's mpicc.
    for t in basic p2p coll comm dtype nbc topo threads selfmsg rma neighbor; do
        if ! mpicc.mpich -O1 -w -I"$root/tests/mpi" -o "$work/c_$t" "$root/tests/mpi/$t.c" >"$work/cc_$t.log" 2>&1; then
            echo "FAIL compiling tests/mpi/$t.c with mpicc.mpich; see $work/cc_$t.log"; fail=1; continue
        fi
        out=$(cd "$work" && timeout 90 "$gwrun" --timeout 60 -n 3 "./c_$t" 2>&1)
        if [ $? -eq 0 ] && echo "$out" | grep -q "^PASS $t"; then
            echo "ok   MPICH-compiled tests/mpi/$t.c (gwrun -n 3)"
        else
            echo "FAIL MPICH-compiled tests/mpi/$t.c (gwrun -n 3)"; echo "$out" | tail -10; fail=1
        fi
    done
else
    skip_or_fail "MPICH-compiled programs: no mpicc.mpich (Debian: libmpich-dev)" || fail=1
fi

# 3. The wheel in a venv of its own.
venv=$work/venv
py=$venv/bin/python
if ! "$py" -c 'import mpi4py, numpy, sys; sys.exit(mpi4py.__version__ != "'$ver'")' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >"$work/venv.log" 2>&1 \
        || { echo "FAIL: cannot create a venv (Debian: python3-venv); see $work/venv.log"; exit 1; }
    if ! timeout 600 "$py" -m pip install -q --only-binary=:all: "mpi4py==$ver" numpy >"$work/pip.log" 2>&1; then
        rm -rf "$venv"
        if ! grep -qE "$offline_re" "$work/pip.log"; then
            echo "FAIL: pip install --only-binary=:all: mpi4py==$ver numpy failed; see $work/pip.log"
            tail -5 "$work/pip.log"; exit 1
        fi
        skip_or_fail "mpi4py wheel: PyPI unreachable; see $work/pip.log" || fail=1
        exit $fail
    fi
fi
so=$(ls "$venv"/lib/python*/site-packages/mpi4py/MPI.mpich.*.so 2>/dev/null | head -1)
[ -n "$so" ] || { echo "FAIL: the installed mpi4py is not the multi-ABI binary wheel (no MPI.mpich.*.so)"; exit 1; }

out=$(cd "$work" && timeout 150 "$gwrun" --timeout 120 -n 4 "$py" "$here/wheel_check.py" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "^wheel check ok with 4 ranks"; then
    echo "ok   mpi4py $ver wheel check (gwrun -n 4 python wheel_check.py)"
else
    echo "FAIL mpi4py $ver wheel check (gwrun -n 4 python wheel_check.py)"; echo "$out" | tail -20; fail=1
fi

# 4. mpi4py's test suite (from the sdist; the wheel has none) with the wheel.
src=$work/mpi4py-$ver
if [ ! -f "$src/test/main.py" ]; then
    sdist=$(ls "$target"/mpi4py-test/mpi4py-$ver.tar.gz "$work"/mpi4py-$ver.tar.gz 2>/dev/null | head -1)
    if [ -z "$sdist" ]; then
        timeout 300 "$py" -m pip download "mpi4py==$ver" --no-deps --no-binary :all: -d "$work" >"$work/pip-download.log" 2>&1
        sdist=$(ls "$work"/mpi4py-$ver.tar.gz 2>/dev/null | head -1)
    fi
    if [ -z "$sdist" ]; then
        if [ -e "$work/pip-download.log" ] && ! grep -qE "$offline_re" "$work/pip-download.log"; then
            echo "FAIL: pip download mpi4py==$ver (sdist, for its test suite) failed; see $work/pip-download.log"
            exit 1
        fi
        skip_or_fail "mpi4py's test suite: no sdist, PyPI unreachable; see $work/pip-download.log" || fail=1
        exit $fail
    fi
    tar -C "$work" -xzf "$sdist" "mpi4py-$ver/test" || exit 1
fi
. "$here/../../tests/mpi/mpi4py-modules.sh"
run_mpi4py_modules "wheel "
echo "test-mpi4py-wheel.sh: $passed of $total mpi4py modules passed with the wheel (2 ranks); $(( $(date +%s) - t0 )) s in all"
[ $report = 1 ] && exit 0
exit $fail
