# python.mk — the Python package (python/), included by the main Makefile.
#   make test-python     its pytest suite on the simulated driver (part of make test; Debian:
#                        apt-get install python3-pytest python3-pip)
#   make install-python  pip install ./python (offline: the build backend, python/_build, is
#                        standard library only); PIP_ARGS adds options (--user, --target DIR)
PYTHON      ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PY_TEST_ENV := GPOOL_TEST_BUILD=$(abspath $(BUILD)) GPOOL_LIBRARY=$(abspath $(BUILD))/libgpool.so \
               GPOOL_LIBCUDA=$(abspath $(SIMLIB))

.PHONY: test-python install-python
test-python: lib $(SIMLIB) $(BUILD)/gpool-bench
	@echo "== python/tests (pytest, simulated driver)"
	@$(PYTHON) -c 'import pytest' 2>/dev/null || { echo "test-python: $(PYTHON) has no pytest; run: apt-get install python3-pytest (as root, make installs it: scripts/deps.sh)" >&2; exit 1; }
	cd python && $(PY_TEST_ENV) $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests

install-python:
	$(PYTHON) -m pip install $(PIP_ARGS) ./python

# sanitizer builds cannot be loaded into an uninstrumented Python
ifeq ($(SAN),)
TEST_AFTER += test-python
endif

# `gpool-bench import` runs the snapshot converter; installed next to gpool-bench
.PHONY: install-snapshot-import uninstall-snapshot-import
install: install-snapshot-import
uninstall: uninstall-snapshot-import
install-snapshot-import:
	$(INSTALL) -d $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 755 tools/snapshot_import.py $(DESTDIR)$(BINDIR)/gpool-snapshot-import
	@# the installed gpool-bench runs from $(GPOOL_TOOLDIR) (pkg.mk) and looks for it there
	$(INSTALL) -d $(DESTDIR)$(GPOOL_TOOLDIR)
	ln -sfr $(DESTDIR)$(BINDIR)/gpool-snapshot-import $(DESTDIR)$(GPOOL_TOOLDIR)/gpool-snapshot-import
uninstall-snapshot-import:
	rm -f $(DESTDIR)$(BINDIR)/gpool-snapshot-import $(DESTDIR)$(GPOOL_TOOLDIR)/gpool-snapshot-import
