#!/usr/bin/env bash
# Installs what `make fuzz` needs, and nothing when it is already there:
# cargo-afl from crates.io (it carries AFL++'s source and builds its runtime
# and afl-fuzz for the machine's rustc: `cargo afl config --build`, no LLVM
# plugins needed, stable Rust). Not run by `make test`, which builds the fuzz
# binaries without afl (corpus replay).
set -euo pipefail
if ! cargo afl --version >/dev/null 2>&1; then
  echo "fuzz/install.sh: cargo install cargo-afl (a minute or two)" >&2
  cargo install --locked cargo-afl
fi
# Builds AFL++ for this rustc when it is not built yet ("already built" is fine).
if ! out=$(cargo afl config --build 2>&1); then
  echo "$out" | grep -q "already built" || { echo "$out" >&2; exit 1; }
fi
