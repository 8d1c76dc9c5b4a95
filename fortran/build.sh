#!/usr/bin/env bash
# Builds gridwire's Fortran layer into OUTDIR (default target/release/fortran):
#   OUTDIR/include/{mpif.h,mpi.mod,mpi_f08.mod}, OUTDIR/libmpifort.{so,a},
#   OUTDIR/gen/ (the generated sources: mpif.h, mpi.f90, mpi_f08.f90, mpifort_glue.c,
#   skipped.txt). Nothing is rebuilt when no input changed.
# libmpifort.so holds the Fortran-callable functions (mpi_send_, MPI_Send_f08) and
# calls libmpi.so's C functions; programs link -lmpifort -lmpi (scripts/gwfort).
# Environment: FC (default gfortran), CC (default cc). Without a Fortran compiler
# it says so and exits 0 (the Fortran tests then follow the skip rule).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${CARGO_TARGET_DIR:-$root/target}/release/fortran}
fc=${FC:-gfortran}
cc=${CC:-cc}
if ! command -v "$fc" >/dev/null 2>&1; then
  echo "fortran/build.sh: no Fortran compiler ($fc); the Fortran bindings are not built" >&2
  exit 0
fi
inputs=("$root"/scripts/gen_fortran.py "$root"/scripts/fortran_model.py "$root"/scripts/mpi_functions.txt
        "$root"/scripts/mpi-abi/constants.json "$root"/crates/capi/src/stubs.rs "$root"/include/mpi.h
        "$root"/fortran/gw_fortran.h "$root"/fortran/gw_fortran.c "$root"/fortran/build.sh)
if [ -f "$out/libmpifort.so" ] && [ -f "$out/libmpifort.a" ]; then
  newer=no
  for f in "${inputs[@]}"; do [ "$f" -nt "$out/libmpifort.so" ] && newer=yes; done
  [ $newer = no ] && exit 0
fi
mkdir -p "$out/gen" "$out/include" "$out/obj"
python3 "$root/scripts/gen_fortran.py" "$out/gen"
# -fno-plt: the glue's call into libmpi.so goes through the GOT directly (one jump less).
cflags=(-O2 -fPIC -fno-plt -fvisibility=hidden -Wall -Wno-unused-variable -I"$root/include" -I"$root/fortran")
"$cc" "${cflags[@]}" -c "$out/gen/mpifort_glue.c" -o "$out/obj/mpifort_glue.o"
"$cc" "${cflags[@]}" -c "$root/fortran/gw_fortran.c" -o "$out/obj/gw_fortran.o"
# The modules: .mod files into include/ beside mpif.h (-J).
"$fc" -O2 -fPIC -J "$out/include" -c "$out/gen/mpi.f90" -o "$out/obj/mpi.o"
"$fc" -O2 -fPIC -J "$out/include" -c "$out/gen/mpi_f08.f90" -o "$out/obj/mpi_f08.o"
cp "$out/gen/mpif.h" "$out/include/mpif.h"
objs=("$out"/obj/{mpifort_glue,gw_fortran,mpi,mpi_f08}.o)
rm -f "$out/libmpifort.a"
ar rcs "$out/libmpifort.a" "${objs[@]}"
# libmpi.so's symbols are resolved when the program links -lmpi after -lmpifort.
"$fc" -shared -o "$out/libmpifort.so.tmp" -Wl,-soname,libmpifort.so "${objs[@]}"
mv "$out/libmpifort.so.tmp" "$out/libmpifort.so"
echo "fortran/build.sh: built $out/libmpifort.so" >&2
