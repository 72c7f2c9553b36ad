# pkg.mk — install, pkg-config and the API reference. Included by the main Makefile.
#   make install [PREFIX=/usr/local] [DESTDIR=/staging]   headers, libgpool.so.X.Y.Z + links,
#                      libgpool.a, libgpool_preload.so (when built), gpool-bench, gpool.pc;
#                      what gpool-bench runs lies in $(LIBDIR)/gpool/ (GPOOL_TOOLDIR): the
#                      binary itself, sim/libcuda.so.1 (the simulated driver), bench/dropin_client
#                      and bench/dropin_replay; $(BINDIR)/gpool-bench is a link to it (gpool-bench
#                      finds them next to its own resolved path)
#   make uninstall     the same variables; removes exactly what install put there, and the
#                      folders it made when they are left empty
#   make docs          build/docs/html from include/gpool.h (Doxygen; a warning is an error)
#   make docs-check    fails when a public symbol, parameter or return value is undocumented

PREFIX       ?= /usr/local
EXEC_PREFIX  ?= $(PREFIX)
BINDIR       ?= $(EXEC_PREFIX)/bin
LIBDIR       ?= $(EXEC_PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL      ?= install
PKG_CONFIG   ?= pkg-config

PKG_HEADERS  := include/gpool.h $(wildcard include/gpool_torch.h include/gpool_preload.h)
GPOOL_TOOLDIR ?= $(LIBDIR)/gpool
# the programs gpool-bench runs (hotpath --dropin, bench-dropin-batch), installed when built
PKG_TOOL_PROGS := $(BUILD)/bench/dropin_client $(BUILD)/bench/dropin_replay
# cuda.h's folder for the .pc's Cflags (a program calling the driver itself needs it; gpool.h
# does not): none when it is the compiler's own /usr/include
PKG_CUDA_CFLAGS := $(if $(filter /usr/include,$(CUDA_HOME)/include),,-I$(CUDA_HOME)/include)
PKG_SHARED   := libgpool.so.$(GPOOL_VERSION)
PKG_PRELOAD  := $(BUILD)/libgpool_preload.so
# Build the preload library first when its fragment knows how; install it whenever it exists.
PKG_PRELOAD_DEP := $(if $(shell grep -ls libgpool_preload.so preload/preload.mk),$(PKG_PRELOAD))

# The library's objects are built for pkg/gpool.map (hidden visibility): rebuild them when the
# export list changes, and once in build trees made before it existed.
$(LIB_OBJ): pkg/gpool.map

# hwloc is linked privately (the public header does not expose it), so it goes to
# Libs.private, not Requires.private: `pkg-config --static --libs gpool` then links libgpool.a
# against the system's shared hwloc (gpool links no jemalloc). Through Requires.private it would also pull
# hwloc's own Libs.private (-ludev on Debian, whose libhwloc-dev lacks libudev-dev) and fail.
PKG_LIBS_PRIVATE  := -lhwloc -ldl -lm -lpthread
# $(3) relative to variable $(2) (whose value is $(1)) when below it: ${prefix}/lib
pkg_rel = $(if $(filter $(1),$(3)),$${$(2)},$(patsubst $(1)/%,$${$(2)}/%,$(3)))

.PHONY: install uninstall docs docs-check
# gpool.pc for this invocation's PREFIX and directories, written straight into the staging tree
# (no shared file in $(BUILD): concurrent installs to different prefixes do not collide).
pkg_write_pc = sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@EXEC_PREFIX@|$(call pkg_rel,$(PREFIX),prefix,$(EXEC_PREFIX))|' \
	    -e 's|@LIBDIR@|$(call pkg_rel,$(EXEC_PREFIX),exec_prefix,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call pkg_rel,$(PREFIX),prefix,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(GPOOL_VERSION)|' \
	    -e 's|@CUDA_CFLAGS@|$(PKG_CUDA_CFLAGS)|' \
	    -e 's|@LIBS_PRIVATE@|$(PKG_LIBS_PRIVATE)|' pkg/gpool.pc.in > $(1)

install: lib $(BUILD)/gpool-bench $(SIMLIB) pkg/gpool.pc.in $(PKG_PRELOAD_DEP)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(GPOOL_TOOLDIR)/sim $(DESTDIR)$(GPOOL_TOOLDIR)/bench
	$(INSTALL) -m 644 $(PKG_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 755 $(BUILD)/$(PKG_SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf $(PKG_SHARED) $(DESTDIR)$(LIBDIR)/$(GPOOL_SONAME)
	ln -sf $(GPOOL_SONAME) $(DESTDIR)$(LIBDIR)/libgpool.so
	$(INSTALL) -m 644 $(BUILD)/libgpool.a $(DESTDIR)$(LIBDIR)/
	@if [ -f $(PKG_PRELOAD) ]; then \
	  echo "$(INSTALL) -m 755 $(PKG_PRELOAD) $(DESTDIR)$(LIBDIR)/"; \
	  $(INSTALL) -m 755 $(PKG_PRELOAD) $(DESTDIR)$(LIBDIR)/; \
	else echo "gpool: $(PKG_PRELOAD) not built; not installing the LD_PRELOAD library"; fi
	$(INSTALL) -m 755 $(BUILD)/gpool-bench $(DESTDIR)$(GPOOL_TOOLDIR)/
	ln -sfr $(DESTDIR)$(GPOOL_TOOLDIR)/gpool-bench $(DESTDIR)$(BINDIR)/gpool-bench
	$(INSTALL) -m 755 $(SIMLIB) $(DESTDIR)$(GPOOL_TOOLDIR)/sim/libcuda.so.1
	ln -sf libcuda.so.1 $(DESTDIR)$(GPOOL_TOOLDIR)/sim/libcuda.so
	@for p in $(PKG_TOOL_PROGS); do if [ -f $$p ]; then \
	  echo "$(INSTALL) -m 755 $$p $(DESTDIR)$(GPOOL_TOOLDIR)/bench/"; \
	  $(INSTALL) -m 755 $$p $(DESTDIR)$(GPOOL_TOOLDIR)/bench/; \
	else echo "gpool: $$p not built; gpool-bench cannot run it when installed"; fi; done
	@if [ -f $(PKG_PRELOAD) ]; then \
	  ln -sfr $(DESTDIR)$(LIBDIR)/libgpool_preload.so $(DESTDIR)$(GPOOL_TOOLDIR)/libgpool_preload.so; fi
	$(call pkg_write_pc,$(DESTDIR)$(PKGCONFIGDIR)/gpool.pc)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then \
	  ldconfig; fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/,gpool.h gpool_torch.h gpool_preload.h)
	rm -f $(addprefix $(DESTDIR)$(GPOOL_TOOLDIR)/,gpool-bench libgpool_preload.so \
	  sim/libcuda.so.1 sim/libcuda.so bench/dropin_client bench/dropin_replay)
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,$(PKG_SHARED) $(GPOOL_SONAME) libgpool.so libgpool.a \
	  libgpool_preload.so)
	rm -f $(DESTDIR)$(BINDIR)/gpool-bench $(DESTDIR)$(PKGCONFIGDIR)/gpool.pc
	@# the folders install made, when nothing else is in them (pkgconfig before lib)
	@for d in $(DESTDIR)$(GPOOL_TOOLDIR)/sim $(DESTDIR)$(GPOOL_TOOLDIR)/bench \
	  $(DESTDIR)$(GPOOL_TOOLDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR); do \
	  if [ -d "$$d" ] && [ -z "$$(ls -A "$$d")" ]; then rmdir "$$d"; fi; done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then \
	  ldconfig; fi

# --- API reference ------------------------------------------------------------------------
# The reference covers include/gpool.h and every other public header with a Doxygen @file
# comment (doxygen skips the symbols of a file without one); docs-check names the others.
DOCS_DIR   := $(BUILD)/docs
DOXY_INPUT := include/gpool.h $(foreach h,$(filter-out include/gpool.h,$(PKG_HEADERS)),\
                $(if $(shell grep -l '@file' $h),$h))
DOXY_SKIPPED = $(filter-out $(DOXY_INPUT),$(PKG_HEADERS))

$(DOCS_DIR)/html/index.html: pkg/Doxyfile $(DOXY_INPUT)
	@pkg/doxygen.sh
	@rm -rf $(DOCS_DIR)/html && mkdir -p $(DOCS_DIR)
	( cat pkg/Doxyfile; echo "INPUT = $(DOXY_INPUT)"; echo "OUTPUT_DIRECTORY = $(DOCS_DIR)" ) \
	  | doxygen - || { rm -rf $(DOCS_DIR)/html; exit 1; }
	@echo "gpool: API reference in $(DOCS_DIR)/html/index.html"
docs: $(DOCS_DIR)/html/index.html

# The same run into a scratch directory, reporting every warning before failing: an
# undocumented type, function, macro, member, enumerator, parameter or return value fails the
# check. (HTML output: doxygen 1.9.4's XML generator warns about documented parameters.)
docs-check:
	@pkg/doxygen.sh
	@for h in $(DOXY_INPUT); do grep -q '@file' $$h || \
	  { echo "docs-check: $$h has no @file comment, so doxygen would skip its symbols"; exit 1; }; done
	@for h in $(DOXY_SKIPPED); do \
	  echo "docs-check: note: $$h is not in the reference yet (no @file comment)"; done
	@mkdir -p $(DOCS_DIR)/check
	@( cat pkg/Doxyfile; echo "INPUT = $(DOXY_INPUT)"; echo "OUTPUT_DIRECTORY = $(DOCS_DIR)/check"; \
	   echo "WARN_AS_ERROR = FAIL_ON_WARNINGS" ) | doxygen - \
	  && echo "docs-check: every public symbol in $(strip $(DOXY_INPUT)) is documented"

# tests/test_install.c re-runs make install with the compiler and flags of this test run.
test: export GPOOL_TEST_CC := $(CC)
test: export GPOOL_TEST_SAN := $(SAN)
test: export GPOOL_TEST_OPT := $(OPT)
