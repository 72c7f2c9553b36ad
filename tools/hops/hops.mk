# hops.mk — the layer tracer (tools/hops), included by the main Makefile.
#   make hops   build a -finstrument-functions libgpool in build/hops and print, for warm
#               alloc/free calls of each kind of block, the src/ folders each call passes and
#               its mutex locks (tools/hops/hops.c; simulated driver). HOPS_FLAGS=-v: every
#               function entered, on stderr.
HOPS_BUILD := $(BUILD)/hops
HOPS_BIN   := $(HOPS_BUILD)/hops

.PHONY: hops
hops: $(HOPS_BIN) $(SIMLIB)
	GPOOL_LIBCUDA=$(abspath $(SIMLIB)) $(HOPS_BIN) $(HOPS_FLAGS)

$(HOPS_BIN): tools/hops/hops.c $(LIB_SRC) | $(DEPS_OK)
	$(MAKE) --no-print-directory BUILD=$(HOPS_BUILD) OPT=-O1 \
	  EXTRA_CFLAGS="-finstrument-functions -fno-inline" $(HOPS_BUILD)/libgpool.so
	$(CC) -std=c11 -O1 -g $(WARN) -D_GNU_SOURCE -Iinclude -o $@ $< -rdynamic \
	  -L$(HOPS_BUILD) -lgpool -ldl -Wl,-rpath,$(abspath $(HOPS_BUILD))
