#!/bin/bash
# mpi4py on gridwire: `pip install`s mpi4py from its source distribution with
# gwcc as the MPI compiler (into a venv under the target directory), runs a
# numpy point-to-point and collectives check under `gwrun -n 4`, and then the
# modules of mpi4py's own test suite that pass (and must keep passing) under
# `gwrun -n 2`. Run by `make test` (crates/capi/tests/extra.sh) and
# `make test-mpi4py`.
#
#   tests/mpi/mpi4py.sh [mpi4py-X.Y.Z.tar.gz]   # else `pip download` fetches one
#   MPI4PY_TESTS="test_p2p_buf test_op" tests/mpi/mpi4py.sh ...
#   MPI4PY_TESTS=all tests/mpi/mpi4py.sh        # every module, report only (exit 0)
#   MPI4PY_PROFILE=release tests/mpi/mpi4py.sh  # against target/release (default debug)
#
# Library profile: debug by default, because `make test` builds the debug
# library (build-debug) and this then only re-checks it; a release build would
# add minutes of compiling for nothing the tests need (the time here goes into
# compiling mpi4py's 280k-line MPI.c, the same for either library). mpi4py's
# extension is linked with an rpath to that directory, so it loads exactly
# the library built for this run.
#
# Needs: python3 with venv and its headers (Debian: python3-venv, python3-dev;
# scripts/install-deps.sh installs them), a C compiler, and PyPI for the sdist,
# Cython and setuptools (cached under the target directory after the first
# run). Exit 0 when everything listed passes, 1 otherwise. When PyPI cannot be
# reached the skip rule of scripts/test-lib.sh applies: under CI=true that is
# a failure, elsewhere "SKIPPED: reason" and exit 0. Any other pip failure is
# a failure everywhere.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/scripts/test-lib.sh"
GW_TEST_NAME=${GW_TEST_NAME:-tests/mpi/mpi4py.sh}
# pip's words for "the index could not be reached" (and only those).
offline_re='Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|Read timed out|ProxyError|Could not fetch URL'
target=${CARGO_TARGET_DIR:-$here/target}
case $target in /*) ;; *) target=$here/$target ;; esac
profile=${MPI4PY_PROFILE:-debug}
work=$target/mpi4py-test
mkdir -p "$work"
t0=$(date +%s)
# Modules that must pass with 2 ranks (mpi4py 4.1.2): one list, shared with
# the wheel's test; see docs/mpi.md for the others.
must_pass=${MPI4PY_TESTS:-$(grep -v "^#" "$here/tests/mpi/mpi4py-must-pass.txt" | tr "\n" " ")}

(cd "$here" && cargo build $([ "$profile" = release ] && echo --release) -q -p gridwire-capi -p gridwire-launch) || exit 1
libdir=$target/$profile
gwrun=$libdir/gwrun

# 1. A venv (sees the system's numpy) with the build requirements. Debian's
#    python3 first: scripts/install-deps.sh gives it numpy, venv and headers,
#    while a python3 found first on PATH (pyenv, a CI image's own) may have
#    none of them.
sys_py=python3
for cand in /usr/bin/python3 python3; do
    if "$cand" -c 'import numpy, venv' 2>/dev/null; then sys_py=$cand; break; fi
done
venv=$work/venv
py=$venv/bin/python
if ! "$py" -c 'import numpy' 2>/dev/null; then
    rm -rf "$venv"
    "$sys_py" -m venv --system-site-packages "$venv" >"$work/venv.log" 2>&1 \
        || { echo "mpi4py.sh: FAIL: cannot create a venv with $sys_py (Debian: apt-get install python3-venv); see $work/venv.log"; exit 1; }
fi
"$py" -c 'import numpy' 2>/dev/null || { echo "mpi4py.sh: FAIL: numpy missing for $sys_py (Debian: python3-numpy)"; exit 1; }
# setuptools >= 70.1 builds wheels itself (bdist_wheel); `wheel` for older ones.
if ! "$py" -c 'import Cython, setuptools, wheel, sys; sys.exit(int(Cython.__version__.split(".")[0]) < 3)' 2>/dev/null; then
    if ! timeout 600 "$py" -m pip install -q 'cython>=3.0.1' 'setuptools>=42' wheel >"$work/pip-build-deps.log" 2>&1; then
        if grep -qE "$offline_re" "$work/pip-build-deps.log"; then
            skip_or_fail "PyPI unreachable for Cython/setuptools; see $work/pip-build-deps.log"
            exit $?
        fi
        echo "mpi4py.sh: FAIL: cannot install Cython/setuptools into $venv; see $work/pip-build-deps.log"; exit 1
    fi
fi

# 2. The source distribution, pinned: the must-pass list is for this version
#    (MPI4PY_VERSION=X.Y.Z for another, MPI4PY_VERSION= for the newest).
#    Downloaded with the venv's pip, which has the build requirements that
#    preparing its metadata needs.
ver=${MPI4PY_VERSION-4.1.2}
spec=mpi4py${ver:+==$ver}
sdist=${1:-}
if [ -z "$sdist" ]; then
    sdist=$(ls "$work"/mpi4py-${ver}*.tar.gz 2>/dev/null | sort -V | tail -1)
fi
if [ -z "$sdist" ]; then
    if ! timeout 300 "$py" -m pip download "$spec" --no-deps --no-binary :all: --no-build-isolation -d "$work" >"$work/pip-download.log" 2>&1; then
        # Only an unreachable index is a reason to skip; anything else is a failure.
        if grep -q 'Downloading mpi4py' "$work/pip-download.log" || ! grep -qE "$offline_re" "$work/pip-download.log"; then
            echo "mpi4py.sh: FAIL: pip download $spec failed; see $work/pip-download.log"
            tail -5 "$work/pip-download.log"; exit 1
        fi
        skip_or_fail "no mpi4py source distribution: PyPI unreachable; see $work/pip-download.log"
        exit $?
    fi
    sdist=$(ls "$work"/mpi4py-${ver}*.tar.gz | sort -V | tail -1)
fi
sdist=$(cd "$(dirname "$sdist")" && pwd)/$(basename "$sdist")
name=$(basename "$sdist" .tar.gz)

# 3. pip install from source with gwcc (again when the sdist, mpi.h, gwcc or the library directory changed).
stamp=$work/installed.stamp
want="$name $libdir $(cksum <"$here/include/mpi.h") $(cksum <"$here/scripts/gwcc")"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! "$py" -c 'from mpi4py import MPI' 2>/dev/null; then
    echo "mpi4py.sh: pip install $name with MPICC=gwcc against $libdir (a few minutes)..."
    tb=$(date +%s)
    "$py" -m pip uninstall -q -y mpi4py >/dev/null 2>&1
    rm -f "$stamp"
    # -O0 -g0 (after Python's own -O3 -g): compiling MPI.c takes a fraction
    # of the time, and the tests measure nothing.
    if ! (cd "$work" && GW_MPI_LIBDIR=$libdir MPICC=$here/scripts/gwcc CFLAGS="${MPI4PY_CFLAGS--O0 -g0}" timeout 1500 \
            "$py" -m pip install -v --no-deps --no-build-isolation --no-binary :all: "$sdist" >"$work/build.log" 2>&1); then
        echo "mpi4py.sh: FAIL: building $name failed; see $work/build.log"; tail -20 "$work/build.log"; exit 1
    fi
    echo "$want" >"$stamp"
    echo "mpi4py.sh: built in $(( $(date +%s) - tb )) s"
fi
# The test suite comes from the sdist (it is not installed).
src=$work/$name
[ -f "$src/test/main.py" ] || tar -C "$work" -xzf "$sdist" "$name/test" || exit 1
fail=0

# 4. numpy arrays: point-to-point and collectives with 4 ranks, results asserted.
numpy_check='
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nxt, prv = (rank + 1) % size, (rank - 1) % size
lib = MPI.Get_library_version()
assert "gridwire" in lib.lower(), lib
# Send/Recv, eager and rendezvous sizes, two dtypes; Sendrecv; Isend/Irecv.
for n in (10, 300000):
    for dt in ("i4", "f8"):
        a = np.arange(n, dtype=dt) * (rank + 1)
        b = np.empty(n, dtype=dt)
        if rank % 2 == 0:
            comm.Send(a, dest=nxt, tag=7); comm.Recv(b, source=prv, tag=7)
        else:
            comm.Recv(b, source=prv, tag=7); comm.Send(a, dest=nxt, tag=7)
        assert np.array_equal(b, np.arange(n, dtype=dt) * (prv + 1)), (n, dt)
        c = np.empty(n, dtype=dt)
        comm.Sendrecv(a, dest=nxt, sendtag=8, recvbuf=c, source=prv, recvtag=8)
        assert np.array_equal(c, b)
        d = np.empty(n, dtype=dt)
        reqs = [comm.Irecv(d, source=prv, tag=9), comm.Isend(a, dest=nxt, tag=9)]
        MPI.Request.Waitall(reqs)
        assert np.array_equal(d, b)
st = MPI.Status()
comm.Send(np.full(5, rank, dtype="i8"), dest=nxt, tag=11)
comm.Probe(source=MPI.ANY_SOURCE, tag=11, status=st)
assert st.Get_source() == prv and st.Get_count(MPI.INT64_T) == 5
x = np.empty(5, dtype="i8"); comm.Recv(x, source=prv, tag=11)
assert (x == prv).all()
# Bcast from every root.
for root in range(size):
    v = np.arange(1000, dtype="f8") * (root + 1) if rank == root else np.zeros(1000)
    comm.Bcast(v, root=root)
    assert np.array_equal(v, np.arange(1000, dtype="f8") * (root + 1)), root
# Allreduce (sum, max, in place), Reduce.
s = np.empty(100, dtype="i4"); comm.Allreduce(np.arange(100, dtype="i4") + rank, s, op=MPI.SUM)
assert np.array_equal(s, size * np.arange(100) + size * (size - 1) // 2)
m = np.empty(3, dtype="f8"); comm.Allreduce(np.array([rank, -rank, 0.5], dtype="f8"), m, op=MPI.MAX)
assert np.array_equal(m, [size - 1, 0, 0.5])
ip = np.full(4, float(rank + 1)); comm.Allreduce(MPI.IN_PLACE, ip, op=MPI.PROD)
assert np.allclose(ip, np.prod(np.arange(1, size + 1)))
r = np.zeros(8, dtype="i8") if rank == 0 else None
comm.Reduce(np.full(8, rank, dtype="i8"), r, op=MPI.SUM, root=0)
assert rank != 0 or (r == size * (size - 1) // 2).all()
# Allgather, Gather, Scatter, Alltoall.
g = np.empty((size, 3), dtype="i4"); comm.Allgather(np.array([rank, rank * 2, -rank], dtype="i4"), g)
assert np.array_equal(g, np.array([[i, 2 * i, -i] for i in range(size)]))
sc = np.arange(size * 2, dtype="f4").reshape(size, 2) if rank == 1 % size else None
mine = np.empty(2, dtype="f4"); comm.Scatter(sc, mine, root=1 % size)
assert np.array_equal(mine, [2 * rank, 2 * rank + 1])
out = np.array([100 * rank + j for j in range(size)], dtype="i4")
inn = np.empty(size, dtype="i4"); comm.Alltoall(out, inn)
assert np.array_equal(inn, [100 * j + rank for j in range(size)]), inn
# Python objects too.
assert comm.allgather({"r": rank}) == [{"r": i} for i in range(size)]
assert comm.bcast(("x", [1, 2]) if rank == 0 else None, root=0) == ("x", [1, 2])
assert comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2
comm.Barrier()
if rank == 0:
    print("numpy p2p+collectives ok with", size, "ranks")
'
out=$(cd "$work" && timeout 150 "$gwrun" --timeout 120 -n 4 "$py" -c "$numpy_check" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "numpy p2p+collectives ok with 4 ranks"; then
    echo "ok   numpy check (gwrun -n 4 python -c ...)"
else
    echo "FAIL numpy check (gwrun -n 4 python -c ...)"; echo "$out" | tail -20; fail=1
fi

# 5. mpi4py's own test modules with 2 ranks.
. "$here/tests/mpi/mpi4py-modules.sh"
run_mpi4py_modules ""
echo "mpi4py.sh: $passed of $total modules passed with 2 ranks; $(( $(date +%s) - t0 )) s in all"
[ $report = 1 ] && exit 0
exit $fail
