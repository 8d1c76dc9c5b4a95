#!/usr/bin/env bash
# Second, independent reader: the Python (stdlib + numpy) implementation must
# decode every committed test vector to exactly the JSON `gwrecord dump` prints.
# Run from the repository root; bounded by `timeout`.
set -euo pipefail
here="crates/wire"
py=""
for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then
        py="$cand"
        break
    fi
done
if [ -z "$py" ]; then
    echo "wire extra.sh: no python3 with numpy (install python3-numpy)" >&2
    exit 1
fi
timeout 120 "$py" "$here/python/gwrecord.py" check "$here/testdata"

# C API: build the static library, compile the C test against gridwire.h, run it.
tgt="${CARGO_TARGET_DIR:-target}"
timeout 600 cargo build -q -p gridwire-wire-capi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gcc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O1 -g -I "$here/include" \
    "$here/tests/c/roundtrip.c" "$tgt/debug/libgridwire_wire_capi.a" \
    -lpthread -ldl -lm -o "$out/roundtrip"
timeout 60 "$out/roundtrip"

# The interpreter-only build (the JIT is a default feature): the conversion
# and hostile-input tests once more without machine code for any plan.
timeout 900 cargo test -q -p gridwire-wire --no-default-features --test convert --test hostile
