#!/bin/bash
# Builds gridwire's MPICH-ABI shim: OUTDIR/libmpi.so.12 (soname libmpi.so.12) and the
# libmpich.so.12 link beside it.
#   compat/mpich-abi/build.sh [OUTDIR]   # default: ${CARGO_TARGET_DIR:-target}/release/mpich-abi
# Needs a C compiler, python3 and MPICH's mpi.h (Debian: libmpich-dev) -- only its
# header, for the constants' values; nothing of MPICH is linked or loaded.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
out=${1:-$target/release/mpich-abi}
cc=${CC:-cc}
mkdir -p "$out/gen"
python3 "$here/gen.py" "$out/gen" --abi-header "$root/include/mpi.h" --cc "$cc"
$cc -O2 -g -fPIC -shared -fvisibility=hidden -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function \
    -Wno-unused-variable -Wno-unused-const-variable -Wno-cast-function-type \
    -I"$here" -I"$out/gen" "$here/shim.c" "$out/gen/gen_wrappers.c" \
    -Wl,-soname,libmpi.so.12 -Wl,-Bsymbolic -Wl,--no-undefined -o "$out/libmpi.so.12.tmp" -ldl -lpthread
mv -f "$out/libmpi.so.12.tmp" "$out/libmpi.so.12"
ln -sf libmpi.so.12 "$out/libmpich.so.12"
echo "built $out/libmpi.so.12"
