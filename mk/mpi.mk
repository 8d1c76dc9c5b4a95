# gridwire MPI: installation and the C test suite. Included from the top-level Makefile.
#
#   make install-mpi PREFIX=/opt/gridwire   # bin/ include/ lib/ lib/pkgconfig/ like other MPIs
#   make test-mpi                           # the C suite (tests/mpi) under gwrun, 1-8 ranks, 1 and 2 hosts
#   make test-mpi4py [MPI4PY_SDIST=...]     # pip install mpi4py from source with gwcc (venv under the
#                                           # target dir), numpy check with 4 ranks, its must-pass tests
#                                           # with 2 ranks; also run by `make test` (crates/capi/tests/extra.sh)
#
# Layout: bin/{gwcc,mpicc,gwrun,mpiexec,mpirun}, include/{mpi.h,gridwire_mpi.h},
# lib/{libmpi.so,libmpi_abi.so}, lib/pkgconfig/{mpi,mpich,gridwire-mpi}.pc.
# CMake's find_package(MPI) finds it with -DMPI_C_COMPILER=$(PREFIX)/bin/gwcc
# (or with $(PREFIX)/bin first in PATH).

PREFIX ?= /usr/local
DESTDIR ?=
MPI_PROFILE ?= release
MPI_TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)/$(MPI_PROFILE)
CARGO ?= cargo

.PHONY: install-mpi install-mpi-files build-mpi test-mpi test-mpi4py

build-mpi:
	$(CARGO) build $(if $(filter release,$(MPI_PROFILE)),--release) -p gridwire-capi -p gridwire-launch

install-mpi: build-mpi install-mpi-files

# The files only (from an existing build in MPI_TARGET_DIR).
install-mpi-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/mpi.h $(DESTDIR)$(PREFIX)/include/mpi.h
	install -m 644 include/gridwire_mpi.h $(DESTDIR)$(PREFIX)/include/gridwire_mpi.h
	install -m 755 $(MPI_TARGET_DIR)/libmpi.so $(DESTDIR)$(PREFIX)/lib/libmpi.so
	ln -sf libmpi.so $(DESTDIR)$(PREFIX)/lib/libmpi_abi.so
	install -m 755 scripts/gwcc $(DESTDIR)$(PREFIX)/bin/gwcc
	ln -sf gwcc $(DESTDIR)$(PREFIX)/bin/mpicc
	install -m 755 $(MPI_TARGET_DIR)/gwrun $(DESTDIR)$(PREFIX)/bin/gwrun
	install -m 755 $(MPI_TARGET_DIR)/gwtools $(DESTDIR)$(PREFIX)/bin/gwtools
	ln -sf gwrun $(DESTDIR)$(PREFIX)/bin/mpiexec
	ln -sf gwrun $(DESTDIR)$(PREFIX)/bin/mpirun
	for pc in mpi mpich gridwire-mpi; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e "s|@NAME@|$$pc|g" include/mpi.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; \
	done
	@echo "installed gridwire MPI in $(DESTDIR)$(PREFIX)"

test-mpi:
	$(CARGO) test -p gridwire-capi --test c_suite

# mpi4py built from source with gwcc against the debug library (MPI4PY_PROFILE=release
# for the other), its must-pass test modules under gwrun -n 2 (needs an mpi4py sdist or
# PyPI; prints "skipped" only when no sdist can be had). MPI4PY_TESTS=all: every module.
test-mpi4py:
	bash tests/mpi/mpi4py.sh $(MPI4PY_SDIST)
