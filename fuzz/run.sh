#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-afl (AFL++) on stable Rust: `make fuzz`.
#
#   fuzz/run.sh [TARGET...]          # default: every fuzz/src/bin/*.rs
#   FUZZ_SECONDS=3600 fuzz/run.sh record_decode
#
# Builds the targets with `cargo afl build --release` into target/fuzz (apart
# from the normal build: other RUSTFLAGS), then runs afl-fuzz on each for
# FUZZ_SECONDS (default 600), seeded with fuzz/corpus/TARGET and resuming the
# queue of an earlier run in target/fuzz/out/TARGET (rm -rf it for a fresh
# start: the counts below add up over resumed runs). Prints per target the
# execs, execs/s, corpus size, crashes and hangs, and exits 1 when any target
# found a crash or a hang (the inputs are in target/fuzz/out/TARGET/default/
# {crashes,hangs}; replay one with target/debug/TARGET FILE).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${FUZZ_SECONDS:-600}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/src/bin/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
bash fuzz/install.sh || exit 1
export CARGO_TARGET_DIR=$root/target/fuzz
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo afl build --release -p gridwire-fuzz "${bins[@]}" || exit 1

# afl-fuzz refuses to start on a machine not tuned for it (core_pattern piped
# to a crash handler, CPU frequency scaling) unless told; those only cost speed.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_AUTORESUME=1
export AFL_NO_AFFINITY=${AFL_NO_AFFINITY:-1}
status=0
summary=()
for t in "${targets[@]}"; do
  out=$CARGO_TARGET_DIR/out/$t
  mkdir -p "$out"
  echo "== fuzz $t for ${seconds} s (afl-fuzz -V $seconds -t 2000 -m none; log $out/afl.log)"
  # -t: an input taking 2 s is a hang; the memory bound is the harness's own.
  timeout $((seconds + 120)) cargo afl fuzz -V "$seconds" -t 2000 -m none \
    -i "fuzz/corpus/$t" -o "$out" "$CARGO_TARGET_DIR/release/$t" >"$out/afl.log" 2>&1
  rc=$?
  stats=$out/default/fuzzer_stats
  if [ ! -f "$stats" ]; then
    echo "fuzz $t: afl-fuzz did not start (exit $rc):"; tail -20 "$out/afl.log"; status=1; continue
  fi
  get() { awk -F': *' -v k="$1" '$1 ~ "^"k" *$" {print $2}' "$stats"; }
  crashes=$(find "$out/default/crashes" -type f ! -name README.txt 2>/dev/null | wc -l)
  hangs=$(find "$out/default/hangs" -type f 2>/dev/null | wc -l)
  # afl-fuzz's counts are cumulative over the runs resumed in $out.
  line="fuzz $t: $(get execs_done) execs in $(get run_time) s ($(get execs_per_sec)/s; cumulative over resumed runs), corpus $(get corpus_count), edges $(get edges_found)/$(get total_edges), $crashes crashes, $hangs hangs"
  echo "$line"
  summary+=("$line")
  [ "$crashes" -eq 0 ] && [ "$hangs" -eq 0 ] || status=1
done
echo "== fuzz summary ($(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null))"
printf '%s\n' "${summary[@]}"
exit $status
