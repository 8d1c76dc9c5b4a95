#!/usr/bin/env bash
# C tests of gridwire.h's decoders (crates/wire-capi/tests/c/*.c): each
# program is compiled against the static library (with AddressSanitizer
# when the compiler has it: every hostile record sits in an allocation of
# exactly its size) and run; each prints "N passed, N failed" and exits
# non-zero on a failure. The JIT (the crate's `jit` feature) is on by
# default; GW_WIRE_NO_JIT=1 tests the interpreter-only library instead.
# Run from the repository root; bounded by `timeout`.
set -euo pipefail
. scripts/test-lib.sh
here="crates/wire-capi"
tgt="${CARGO_TARGET_DIR:-target}"
if ! command -v gcc >/dev/null 2>&1; then
    skip_or_fail "no gcc (scripts/install-deps.sh installs build-essential)"
    exit $?
fi
flags=()
expect_jit=1
[ -z "${GW_WIRE_NO_JIT:-}" ] || { flags=(--no-default-features); expect_jit=; }
timeout 900 cargo build -q -p gridwire-wire-capi "${flags[@]}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
san=()
if echo 'int main(void){return 0;}' | gcc -x c -fsanitize=address - -o "$out/probe" 2>/dev/null; then
    san=(-fsanitize=address -fno-omit-frame-pointer)
fi
for src in "$here"/tests/c/*.c; do
    name="$(basename "$src" .c)"
    gcc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O1 -g "${san[@]}" -I crates/wire/include \
        "$src" "$tgt/debug/libgridwire_wire_capi.a" -lpthread -ldl -lm -o "$out/$name"
    echo "wire-capi C test $name:"
    GW_EXPECT_JIT="$expect_jit" ASAN_OPTIONS=detect_leaks=1 timeout 120 "$out/$name"
done
