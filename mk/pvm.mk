# The PVM face (issue 17): installation. Included from the top-level Makefile.
#   make install-pvm PREFIX=/opt/gridwire   # include/pvm3.h, lib/libpvm3.{so,a}, lib/libgpvm3.{so,a}, bin/gwpvm
# Groups live in libpvm3 itself; libgpvm3 is the same library under PVM's
# second name, so `-lgpvm3 -lpvm3` links unchanged.
PVM_PROFILE ?= release
PVM_TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)/$(PVM_PROFILE)

.PHONY: install-pvm build-pvm

build-pvm:
	$(CARGO) build $(if $(filter release,$(PVM_PROFILE)),--release) -p gridwire-pvm

install-pvm: build-pvm
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	install -m 644 include/pvm3.h $(DESTDIR)$(PREFIX)/include/pvm3.h
	install -m 755 $(PVM_TARGET_DIR)/libpvm3.so $(DESTDIR)$(PREFIX)/lib/libpvm3.so
	install -m 644 $(PVM_TARGET_DIR)/libpvm3.a $(DESTDIR)$(PREFIX)/lib/libpvm3.a
	ln -sf libpvm3.so $(DESTDIR)$(PREFIX)/lib/libgpvm3.so
	ln -sf libpvm3.a $(DESTDIR)$(PREFIX)/lib/libgpvm3.a
	install -m 755 $(PVM_TARGET_DIR)/gwpvm $(DESTDIR)$(PREFIX)/bin/gwpvm
	@echo "installed gridwire PVM in $(DESTDIR)$(PREFIX)"
