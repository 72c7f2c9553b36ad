# python.mk — the Python package (python/), included by the main Makefile.
#   make test-python     its pytest suite on the simulated driver (part of make test; Debian:
#                        apt-get install python3-pytest python3-pip)
#   make install-python  pip install ./python (offline: the build backend, python/_build, is
#                        standard library only, and builds libgpool.so and the drop-in into the
#                        wheel); VENV=DIR installs into a venv there (made if missing); PIP_ARGS
#                        adds pip options (--user --break-system-packages, --target DIR)
PYTHON      ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PY_TEST_ENV := GPOOL_TEST_BUILD=$(abspath $(BUILD)) GPOOL_LIBRARY=$(abspath $(BUILD))/libgpool.so \
               GPOOL_LIBCUDA=$(abspath $(SIMLIB))

.PHONY: test-python install-python
test-python: lib $(SIMLIB) $(BUILD)/gpool-bench $(BUILD)/tests/preload/libcudart.so.13
	@echo "== python/tests (pytest, simulated driver)"
	@$(PYTHON) -c 'import pytest' 2>/dev/null || { echo "test-python: $(PYTHON) has no pytest; run: apt-get install python3-pytest (as root, make installs it: scripts/deps.sh)" >&2; exit 1; }
	cd python && $(PY_TEST_ENV) $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests

# Debian 12's Python is externally managed (PEP 668): pip refuses to install into it, --user
# included, unless told --break-system-packages. VENV=DIR makes (or reuses) a venv there and
# installs into it; PIP_ARGS is passed to pip as it is (--user --break-system-packages,
# --target DIR); a Python in a venv, or one not externally managed, gets pip install directly.
# The wheel is built by the backend with this Makefile (GPOOL_BUILD: the same build folder).
VENV ?=
PY_EXTERNALLY_MANAGED = $(PYTHON) -c 'import os, sys, sysconfig; sys.exit(sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")))'
install-python: lib
ifneq ($(VENV),)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	GPOOL_BUILD=$(abspath $(BUILD)) $(VENV)/bin/python -m pip install --no-index $(PIP_ARGS) ./python
	@echo "install-python: installed into $(VENV); $(VENV)/bin/python -c 'import gpool' or $(VENV)/bin/gpool-run -- PROG"
else
	@if [ -z "$(PIP_ARGS)" ] && ! $(PY_EXTERNALLY_MANAGED); then \
	  echo "install-python: $(PYTHON) is externally managed (PEP 668); run: make install-python VENV=$$HOME/.venvs/gpool (or PIP_ARGS='--user --break-system-packages')" >&2; exit 1; fi
	GPOOL_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pip install --no-index $(PIP_ARGS) ./python
endif

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
