# Coverage-guided fuzzing (cargo-afl, stable Rust): long runs, not part of
# `make test` (which builds the same binaries without afl and replays the
# corpora). Included from the top-level Makefile.
#
#   make fuzz                                  # every target, FUZZ_SECONDS each
#   make fuzz FUZZ_TARGET=record_decode FUZZ_SECONDS=3600
#
# Reports execs, execs/s, crashes and hangs per target; fails on any crash or
# hang. See docs/testing.md (adding a target) and docs/reliability.md (figures).
FUZZ_SECONDS ?= 600
FUZZ_TARGET ?=

.PHONY: fuzz
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh $(FUZZ_TARGET)
