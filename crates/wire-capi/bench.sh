#!/usr/bin/env bash
# Records from C (part of `make bench`): crates/wire-capi/bench/capi_bench.c
# against the release static library, with the JIT (GW_WIRE_NO_JIT=1: the
# interpreter only). Prints a markdown table; RUNS rounds (default 7),
# medians. Usage: crates/wire-capi/bench.sh [mixed|nested|f64]
set -euo pipefail
cd "$(dirname "$0")/../.."
tgt="${CARGO_TARGET_DIR:-target}"
features="bench,jit"
nojit=()
[ -z "${GW_WIRE_NO_JIT:-}" ] || { features="bench"; nojit=(--no-default-features); }
cargo build -q --release -p gridwire-wire-capi "${nojit[@]}" --features "$features"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gcc -std=c11 -O2 -Wall -Wextra -Werror -I crates/wire/include crates/wire-capi/bench/capi_bench.c \
    "$tgt/release/libgridwire_wire_capi.a" -lpthread -ldl -lm -o "$out/capi_bench"
echo "capi bench: features $features, RUNS=${RUNS:-7}, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg)" >&2
"$out/capi_bench" "$@"
