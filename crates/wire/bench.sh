#!/usr/bin/env bash
# Wire benchmarks: prints a markdown table (called by the top-level `make bench`).
# Usage: crates/wire/bench.sh [mixed|ten|big|var]
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" cargo bench -q -p gridwire-wire --bench wire -- "$@" 2>/dev/null
