# `make reliability`: the long fault-injection and abuse runs (not part of `make test`):
# 200 random kills here, the hostile-traffic checks in mk/reliability-net.mk.
.PHONY: reliability reliability-kills

reliability: reliability-kills reliability-net

## 200 SIGKILLs of a rank in a running job (tcp, shm, udp; one host and emulated
## hosts) from a random seed, printed so that a failure can be replayed with
## GW_FAULT_SEED=<seed> GW_FAULT_RUNS=200 cargo test -p gridwire-launch --test fault_kills.
RELIABILITY_KILLS ?= 200
reliability-kills: build-debug
	@seed=$${GW_FAULT_SEED:-$$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}; \
	echo "reliability: $(RELIABILITY_KILLS) kills, GW_FAULT_SEED=$$seed"; \
	GW_FAULT_SEED=$$seed GW_FAULT_RUNS=$(RELIABILITY_KILLS) \
	  $(CARGO) test -p gridwire-launch --test fault_kills killed_rank_ends_the_job -- --nocapture
