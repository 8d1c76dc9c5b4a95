#!/usr/bin/env bash
# The MPICH-ABI shim (compat/mpich-abi): an MPICH-compiled C program and
# mpi4py's PyPI binary wheel on gridwire. Run by `make test` (test-extra, from
# the repository root, under `timeout 900`); uses the debug build `make test`
# makes. The first run on a machine downloads the wheel and numpy into a venv
# under $CARGO_TARGET_DIR/mpi4py-wheel-test; later runs reuse it.
set -u
cd "$(dirname "$0")/../../.."
exec timeout 840 bash compat/mpich-abi/test-mpi4py-wheel.sh "$@"
