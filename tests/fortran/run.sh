#!/usr/bin/env bash
# The Fortran suite (docs/fortran.md), run by `make test` through
# crates/capi/tests/fortran_suite.rs:
#   tests/fortran/run.sh PROFILE_DIR      # e.g. target/debug (libmpi.so, gwrun)
# 1. builds the Fortran layer (fortran/build.sh PROFILE_DIR/fortran; nothing when
#    up to date);
# 2. compiles f77_mpi.f (include 'mpif.h'), f90_mpi.f90 (use mpi), f08_mpi.f90
#    (use mpi_f08) and f90_more.f90 (more argument kinds, use mpi) with scripts/gwfort
#    and runs each with the real gwrun -n 4, on one host and on 2 emulated hosts
#    (f90_more also with -n 3 and -n 1); f08_mpi_t.f90 (MPI_T through
#    ISO_C_BINDING) with -n 2 on one host and on 2 emulated hosts; each must
#    exit 0 and print "PASS <name>";
# 3. installs (make -f mk/mpi.mk -f mk/fortran.mk install-*-files) into
#    PROFILE_DIR/fortran-install-test: the installed mpifort builds f90_mpi, mpiexec
#    runs it, pkg-config answers for mpi-fort, and CMake's
#    find_package(MPI COMPONENTS C Fortran) builds f08_mpi, which runs.
# Without gfortran (or cmake, pkg-config for step 3) it follows the skip rule.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. scripts/test-lib.sh
export GW_TEST_NAME=fortran_suite
prof=$(cd "${1:?usage: tests/fortran/run.sh PROFILE_DIR}" && pwd)
fc=${GWFORT_FC:-gfortran}
if ! command -v "$fc" >/dev/null 2>&1; then
  skip_or_fail "no Fortran compiler ($fc; scripts/install-deps.sh installs gfortran)"; exit $?
fi
[ -f "$prof/libmpi.so" ] || { echo "FAIL: $prof/libmpi.so missing (cargo build -p gridwire-capi)"; exit 1; }
if [ ! -x "$prof/gwrun" ]; then
  rel=; [ "$(basename "$prof")" = release ] && rel=--release
  CARGO_TARGET_DIR=$(dirname "$prof") ${CARGO:-cargo} build -q $rel -p gridwire-launch --bin gwrun || exit 1
fi
bash fortran/build.sh "$prof/fortran" || { echo "FAIL: fortran/build.sh"; exit 1; }
out=$prof/fortran-tests
mkdir -p "$out"
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# run NAME EXE GWRUN ARGS...: the job must end by itself with status 0 and print "PASS NAME".
run() {
  local name=$1 exe=$2 gwrun=$3 log t0
  shift 3
  log=$out/$name.log
  t0=$(date +%s%N)
  timeout 120 "$gwrun" --timeout 60 "$@" "$exe" >"$log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $rc -eq 0 ] && grep -q "^PASS $name\$" "$log"; then
    echo "ok   $name: $(basename "$gwrun") $* ($ms ms)"
  else
    fail "$name: $(basename "$gwrun") $* (exit $rc):"; sed 's/^/    /' "$log"
  fi
}

for src in tests/fortran/f77_mpi.f tests/fortran/f90_mpi.f90 tests/fortran/f08_mpi.f90 tests/fortran/f90_more.f90; do
  name=$(basename "${src%.*}")
  if ! GW_MPI_LIBDIR=$prof scripts/gwfort -O1 -Wall -o "$out/$name" "$src" >"$out/$name.build.log" 2>&1; then
    fail "gwfort $src:"; sed 's/^/    /' "$out/$name.build.log"; continue
  fi
  run "$name" "$out/$name" "$prof/gwrun" -n 4
  run "$name" "$out/$name" "$prof/gwrun" -n 4 --emulate-hosts 2
done
# MPI_T from Fortran (through ISO_C_BINDING: the standard has no Fortran
# MPI_T bindings), 2 ranks over shm and over tcp between 2 emulated hosts.
name=f08_mpi_t
if GW_MPI_LIBDIR=$prof scripts/gwfort -O1 -Wall -o "$out/$name" tests/fortran/$name.f90 >"$out/$name.build.log" 2>&1; then
  run "$name" "$out/$name" "$prof/gwrun" -n 2
  run "$name" "$out/$name" "$prof/gwrun" -n 2 --emulate-hosts 2
else
  fail "gwfort tests/fortran/$name.f90:"; sed 's/^/    /' "$out/$name.build.log"
fi
# An odd size and a single rank (3x1 and 1x1 grids, self-messages) for the argument-kind test.
run f90_more "$out/f90_more" "$prof/gwrun" -n 3 --emulate-hosts 2
run f90_more "$out/f90_more" "$prof/gwrun" -n 1

# The installed layout, pkg-config and CMake.
prefix=$prof/fortran-install-test
rm -rf "$prefix"
if ! make -s -f mk/mpi.mk -f mk/fortran.mk install-mpi-files install-fortran-files \
     PREFIX="$prefix" MPI_TARGET_DIR="$prof" >"$out/install.log" 2>&1; then
  fail "make install-mpi-files install-fortran-files:"; sed 's/^/    /' "$out/install.log"
else
  for f in bin/mpifort bin/mpif90 bin/mpif77 include/mpif.h include/mpi.mod include/mpi_f08.mod \
           lib/libmpifort.so lib/libmpifort.a lib/pkgconfig/mpi-fort.pc; do
    [ -e "$prefix/$f" ] || fail "$f not installed"
  done
  if "$prefix/bin/mpifort" -o "$out/f90_installed" tests/fortran/f90_mpi.f90 >"$out/installed.log" 2>&1; then
    deps=$(ldd "$out/f90_installed")
    grep -q "$prefix/lib/libmpifort.so" <<<"$deps" || fail "installed mpifort: libmpifort not from $prefix"
    run f90_mpi "$out/f90_installed" "$prefix/bin/mpiexec" -n 2
  else
    fail "installed mpifort:"; sed 's/^/    /' "$out/installed.log"
  fi
  if command -v pkg-config >/dev/null 2>&1; then
    libs=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --libs mpi-fort)
    case $libs in *"-L$prefix/lib"*-lmpifort*-lmpi*) ;; *) fail "pkg-config --libs mpi-fort: $libs" ;; esac
  else
    skip_or_fail "pkg-config not installed: mpi-fort.pc is unchecked" || failed=$((failed + 1))
  fi
  if command -v cmake >/dev/null 2>&1; then
    cm=$prefix/cmake
    mkdir -p "$cm/src"
    cp tests/fortran/f08_mpi.f90 "$cm/src/"
    cat >"$cm/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.10)
project(gwfortran C Fortran)
find_package(MPI REQUIRED COMPONENTS C Fortran)
if(NOT MPI_Fortran_HAVE_F77_HEADER OR NOT MPI_Fortran_HAVE_F90_MODULE OR NOT MPI_Fortran_HAVE_F08_MODULE)
  message(FATAL_ERROR "FindMPI: mpif.h ${MPI_Fortran_HAVE_F77_HEADER} mpi ${MPI_Fortran_HAVE_F90_MODULE} mpi_f08 ${MPI_Fortran_HAVE_F08_MODULE}")
endif()
add_executable(f08_mpi f08_mpi.f90)
target_link_libraries(f08_mpi MPI::MPI_Fortran)
CMAKE
    if PATH=$prefix/bin:$PATH cmake -S "$cm/src" -B "$cm/build" -DMPI_C_COMPILER="$prefix/bin/mpicc" \
         -DMPI_Fortran_COMPILER="$prefix/bin/mpifort" >"$out/cmake.log" 2>&1 &&
       cmake --build "$cm/build" >>"$out/cmake.log" 2>&1; then
      grep -q "Found MPI_Fortran: $prefix/lib/libmpifort.so" "$out/cmake.log" || fail "cmake found another MPI_Fortran: $(grep 'Found MPI_Fortran' "$out/cmake.log")"
      run f08_mpi "$cm/build/f08_mpi" "$prefix/bin/mpiexec" -n 2
    else
      fail "cmake find_package(MPI COMPONENTS C Fortran):"; sed 's/^/    /' "$out/cmake.log"
    fi
  else
    skip_or_fail "cmake not installed: find_package(MPI COMPONENTS Fortran) is unchecked" || failed=$((failed + 1))
  fi
fi
if [ $failed -gt 0 ]; then
  echo "fortran suite: $failed failure(s)"
  exit 1
fi
echo "fortran suite: all passed"
