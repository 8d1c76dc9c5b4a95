#!/usr/bin/env bash
# mpi4py on gridwire (issue 3): `pip install` of the mpi4py sdist with gwcc,
# a numpy point-to-point/collectives check with 4 ranks, and the mpi4py test
# modules that must keep passing with 2 ranks. Run by `make test` (test-extra,
# from the repository root, under `timeout 900`). Uses the debug library that
# `make test` builds (see tests/mpi/mpi4py.sh); the first run on a machine
# spends a few minutes compiling mpi4py, later runs reuse the venv under
# $CARGO_TARGET_DIR/mpi4py-test. When PyPI cannot be reached it follows the
# skip rule (scripts/test-lib.sh): fails under CI=true, "SKIPPED" elsewhere.
set -u
cd "$(dirname "$0")/../../.."
exec timeout 840 bash tests/mpi/mpi4py.sh "$@"
