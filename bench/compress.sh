#!/usr/bin/env bash
# The compress transform's byte shuffle (issue 13: "a byte-shuffle filter
# for floating-point arrays if it pays"): wire size and seal/open speed of
# the transform as it decides by itself, against plain zstd -1 and memcpy,
# and the effective bandwidth over a LINK_MBIT (100) Mbit/s link, for 4 MiB
# messages of doubles, floats, integers, text and random bytes. One process,
# no network: crates/core/examples/compress_bench.rs. Markdown on stdout.
#   REPS (7): fastest of REPS per figure.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p gridwire-core --example compress_bench
echo "### Compress transform: byte shuffle, $(date -u '+%Y-%m-%d %H:%M UTC'), \`bash bench/compress.sh\`, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo
target/release/examples/compress_bench "${REPS:-7}"
