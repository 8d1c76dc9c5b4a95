# gridwire — the two commands: `make demo` and `make test`. `make bench` measures.
SHELL := /bin/bash
CARGO ?= cargo
RELEASE := target/release
DEBUG := target/debug

.PHONY: all deps build build-debug demo test test-rust test-extra bench bench-startup install clean

# MPI packaging and its C suite (install-mpi, test-mpi).
include mk/mpi.mk
# The MPICH-ABI shim (mpi4py's PyPI wheel, MPICH-compiled programs): compat/mpich-abi.
include compat/mpich-abi/mpich-abi.mk
# Fault injection and abuse runs: `make reliability`.
include mk/reliability.mk
# Coverage-guided fuzzing (cargo-afl): make fuzz [FUZZ_TARGET=x] [FUZZ_SECONDS=n].
include mk/fuzz.mk
# Hostile traffic at a running job (flood, open-file limit, authenticated garbage).
include mk/reliability-net.mk
build: build-mpich-abi
build-debug: build-mpich-abi-debug
install: install-mpich-abi
# Fortran bindings (mpif.h, use mpi, use mpi_f08, libmpifort, gwfort): docs/fortran.md.
include mk/fortran.mk
build: build-fortran
build-debug: build-fortran-debug
install: install-fortran
# The PVM face: pvm3.h, libpvm3/libgpvm3, gwpvm (docs/pvm.md).
include mk/pvm.mk
install: install-pvm

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace --lib --bins --examples

build-debug: deps
	$(CARGO) build --workspace --lib --bins --examples

## The main job: RSRs across 2 sites x 2 real hosts of the grid testbed (10 ms WAN),
## started by one `gwrun -f` with staging; startpoint migration, per-pair methods, --stats.
## Without root/namespaces/sshd: the same job on 2 emulated hosts (scripts/demo.sh says why).
demo: build
	@R=$(RELEASE) bash scripts/demo.sh

## Every test: fmt and clippy, Rust unit and multi-process tests, then each crate's
## extra test script; each suite timed, closing with "N passed, N failed, N skipped".
test: build-debug
	@bash mk/run-tests.sh

test-rust:
	$(CARGO) test --workspace --no-fail-fast

test-extra:
	@set -e; for f in crates/*/tests/extra.sh compat/*/tests/extra.sh; do \
	  [ -e "$$f" ] || continue; echo "== $$f"; timeout 900 bash "$$f"; done

## Benchmarks (not tests): figures go to bench/out and are summarised in docs/benchmarks.md.
bench: build
	bash bench/run.sh

## Start-up across testbed hosts (issue 12): gwrun -f vs Hydra vs Open MPI (also run by bench).
bench-startup: build
	bash bench/startup.sh

## Install MPI-style: PREFIX/bin/{gwcc,mpicc,gwrun,mpiexec,mpirun}, include/mpi.h, lib/libmpi.so …
install: deps install-mpi

clean:
	$(CARGO) clean
