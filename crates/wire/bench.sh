#!/usr/bin/env bash
# Wire benchmarks: prints a markdown table (called by the top-level `make bench`).
# Usage: crates/wire/bench.sh [mixed|ten|big|var]
set -euo pipefail
cd "$(dirname "$0")/../.."
# bincode/prost columns need `bench-compare`; the JIT column needs `jit`
# (GW_WIRE_NO_JIT=1 leaves it out, e.g. to save the Cranelift build).
features="bench-compare"
[ -n "${GW_WIRE_NO_JIT:-}" ] || features="$features,jit"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" cargo bench -q -p gridwire-wire --bench wire \
    --features "$features" -- "$@" 2>/dev/null
