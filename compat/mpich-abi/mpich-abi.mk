# The MPICH-ABI shim (compat/mpich-abi, docs/mpi.md): libmpi.so.12 for programs
# built for MPICH's ABI (mpi4py's PyPI wheel, mpicc.mpich binaries), built into
# <target>/<profile>/mpich-abi beside libmpi.so and gwrun, installed as
# PREFIX/lib/mpich-abi/{libmpi.so.12,libmpich.so.12}. Included from the Makefile.
#
#   make build-mpich-abi [MPI_PROFILE=debug]   # also part of `make build` / `make build-debug`
#   make test-mpich-abi                        # compat/mpich-abi/test-mpi4py-wheel.sh (also in `make test`)

MPICH_ABI_TARGET := $(or $(CARGO_TARGET_DIR),target)

.PHONY: build-mpich-abi build-mpich-abi-debug install-mpich-abi test-mpich-abi

build-mpich-abi: deps
	bash compat/mpich-abi/build.sh $(MPICH_ABI_TARGET)/release/mpich-abi

build-mpich-abi-debug: deps
	bash compat/mpich-abi/build.sh $(MPICH_ABI_TARGET)/debug/mpich-abi

# After install-mpi-files: the shim finds gridwire at ../libmpi_abi.so.
install-mpich-abi: install-mpi
	bash compat/mpich-abi/build.sh $(MPI_TARGET_DIR)/mpich-abi
	install -d $(DESTDIR)$(PREFIX)/lib/mpich-abi
	install -m 755 $(MPI_TARGET_DIR)/mpich-abi/libmpi.so.12 $(DESTDIR)$(PREFIX)/lib/mpich-abi/libmpi.so.12
	ln -sf libmpi.so.12 $(DESTDIR)$(PREFIX)/lib/mpich-abi/libmpich.so.12

test-mpich-abi:
	bash compat/mpich-abi/test-mpi4py-wheel.sh
