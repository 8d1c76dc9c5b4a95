# The network side of `make reliability` (the random kills are mk/reliability.mk):
# hostile traffic at a running MPI job, loopback only. Included from the
# top-level Makefile; each check appends its figures to
# target/reliability/results.txt (summarised in docs/reliability.md).
#
#   make reliability-net                      # all three, debug build
#   make reliability-net RELIABILITY_PROFILE=release
#
#   flood        10 000 unauthenticated tcp connections and udp datagrams at the
#                ranks' listeners during a ping-pong; latency beside its quiet windows
#   fdlimit      ranks under a low `ulimit -n`, peers holding connections open:
#                the job goes on, the ranks say so clearly (no EMFILE spin)
#   hostile-peer an authenticated peer sending random frames: that link fails
#                with a clear error, nothing crashes or hangs
RELIABILITY_PROFILE ?= debug

.PHONY: reliability-net
reliability-net: build-debug
	@export RELIABILITY_PROFILE=$(RELIABILITY_PROFILE); fail=0; \
	for t in flood fdlimit hostile-peer; do \
	  echo "== reliability-net: $$t"; t0=$$(date +%s); \
	  if timeout 600 bash tests/reliability/$$t.sh; then r=ok; else r=FAILED; fail=1; fi; \
	  echo "suite reliability-net/$$t: $$(( $$(date +%s) - t0 )) s ($$r)"; \
	done; exit $$fail
