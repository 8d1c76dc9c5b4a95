#!/bin/bash
# mpi4py on gridwire: builds mpi4py from source with gwcc and runs the modules
# of mpi4py's own test suite that pass (and must keep passing) under
# `gwrun -n 2`. Not part of `cargo test` (it needs an mpi4py source
# distribution and a few minutes of compiling).
#
#   tests/mpi/mpi4py.sh [mpi4py-X.Y.Z.tar.gz]   # else `pip download` fetches one
#   MPI4PY_TESTS="test_p2p_buf test_op" tests/mpi/mpi4py.sh ...
#
# Exit 0 when every listed module passes, 1 otherwise; 0 with "skipped" when
# no source distribution can be had (offline) or numpy-free Python lacks pip.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$here/target}
work=$target/mpi4py-test
mkdir -p "$work"
# Modules that pass with 2 ranks (mpi4py 4.1.2); see docs/mpi.md for the others.
must_pass=${MPI4PY_TESTS:-"test_address test_attributes test_cco_buf test_cco_obj test_cco_vec test_cffi
 test_ctypes test_doc test_environ test_group test_handle test_info test_mpiabi test_mpiapi test_mpimem
 test_msgzero test_op test_p2p_buf test_p2p_buf_matched test_p2p_obj test_p2p_obj_matched test_package
 test_pickle test_rma test_rma_nb test_status test_threads test_toplevel test_util_dtlib test_util_pool"}

(cd "$here" && cargo build --release -p gridwire-capi -p gridwire-launch) || exit 1
libdir=$target/release
gwrun=$libdir/gwrun

sdist=${1:-}
if [ -z "$sdist" ]; then
    sdist=$(ls "$work"/mpi4py-*.tar.gz 2>/dev/null | head -1)
fi
if [ -z "$sdist" ]; then
    if ! timeout 300 python3 -m pip download mpi4py --no-deps --no-binary :all: --no-build-isolation -d "$work" >"$work/pip.log" 2>&1; then
        echo "mpi4py.sh: skipped: no mpi4py source distribution (see $work/pip.log)"
        exit 0
    fi
    sdist=$(ls "$work"/mpi4py-*.tar.gz | head -1)
fi
src=$work/$(basename "$sdist" .tar.gz)
if [ ! -d "$src/build" ] || [ "$libdir/libmpi.so" -nt "$src/build" ]; then
    rm -rf "$src" && tar -C "$work" -xzf "$sdist" || exit 1
    echo "building $(basename "$src") with gwcc (a few minutes)..."
    (cd "$src" && GW_MPI_LIBDIR=$libdir MPICC=$here/scripts/gwcc timeout 1800 python3 setup.py build >"$work/build.log" 2>&1) \
        || { echo "mpi4py.sh: build failed, see $work/build.log"; exit 1; }
fi
export PYTHONPATH=$(ls -d "$src"/build/lib.*)
fail=0
for t in $must_pass; do
    out=$(cd "$src" && timeout 150 "$gwrun" --timeout 120 -n 2 python3 test/main.py -q "$t" 2>&1)
    if [ $? -eq 0 ]; then
        echo "ok   $t: $(echo "$out" | grep -E '^Ran' | head -1)"
    else
        echo "FAIL $t"; echo "$out" | tail -15; fail=1
    fi
done
exit $fail
