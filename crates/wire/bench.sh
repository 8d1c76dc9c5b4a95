#!/usr/bin/env bash
# Wire benchmarks: prints a markdown table (called by the top-level `make bench`).
# Usage: crates/wire/bench.sh [mixed|ten|big|var]
set -euo pipefail
cd "$(dirname "$0")/../.."
# bincode/prost columns need `bench-compare`; the JIT (a default feature)
# is left out with GW_WIRE_NO_JIT=1 (the interpreter-only build).
nojit=()
[ -z "${GW_WIRE_NO_JIT:-}" ] || nojit=(--no-default-features)
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" cargo bench -q -p gridwire-wire --bench wire \
    "${nojit[@]}" --features bench-compare -- "$@" 2>/dev/null
