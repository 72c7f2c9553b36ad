# preload.mk — libgpool_preload.so, the LD_PRELOAD drop-in for ML frameworks, and the helper
# programs tests/test_preload.c runs under it. Included by the main Makefile.
#
#   LD_PRELOAD=build/libgpool_preload.so python train.py
#
# The interposer links gpool in statically (libgpool.a, built -fPIC) and exports only the hooks
# listed in preload/preload.map.
# It links nothing but libc (and libdl, part of it since glibc 2.34): every process started
# under LD_PRELOAD loads it. No jemalloc; hwloc is loaded on first use (preload_hwloc.c), and
# --no-undefined fails the link if gpool calls an hwloc function preload_hwloc.c lacks (not in
# sanitizer builds: clang leaves the sanitizer runtime out of shared objects, to be resolved in
# the executable).
PRELOAD_NO_UNDEFINED := $(if $(SAN),,-Wl,--no-undefined)
PRELOAD_OBJ   := $(PRELOAD_SRC:%.c=$(BUILD)/obj/%.o)
PRELOAD_LIB   := $(BUILD)/libgpool_preload.so
PRELOAD_TDIR  := $(BUILD)/tests/preload
PRELOAD_HELPERS = $(PRELOAD_TDIR)/libcudart.so.13 $(RUNTIME_PROGS) $(LINKED_PROGS) \
	$(PRELOAD_TDIR)/driver_prog $(PRELOAD_TDIR)/libnext_base.so $(PRELOAD_TDIR)/libnext_wrap.so \
	$(PRELOAD_TDIR)/next_prog

.PHONY: preload
preload: $(PRELOAD_LIB)
lib: $(PRELOAD_LIB)

# gpool's objects are compiled once more for the interposer with the initial-exec TLS model:
# gpool_alloc/gpool_free's thread-cache path reads a thread-local on every call, and in a
# shared object the default model makes that a __tls_get_addr call. LD_PRELOAD loads the
# interposer at start-up, where its 1.2 KB of TLS goes into the static block.
PRELOAD_GPOOL_OBJ := $(LIB_SRC:src/%.c=$(BUILD)/obj/preload-gpool/%.o)
$(BUILD)/obj/preload-gpool/%.o: src/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -ftls-model=initial-exec -MMD -MP -c $< -o $@
-include $(PRELOAD_GPOOL_OBJ:.o=.d)

$(PRELOAD_LIB): $(PRELOAD_OBJ) $(PRELOAD_GPOOL_OBJ) preload/preload.map
	$(CC) -shared -Wl,--version-script=preload/preload.map $(PRELOAD_NO_UNDEFINED) -o $@ $(PRELOAD_OBJ) \
	  $(PRELOAD_GPOOL_OBJ) $(LDFLAGS) -ldl

# A stand-in libcudart.so.13 whose memory functions fail loudly: under LD_PRELOAD none of them
# may be reached for gpool's pointers.
$(PRELOAD_TDIR)/libcudart.so.13: $(BUILD)/obj/tests/preload/cudart_standin.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libcudart.so.13 -o $@ $< $(LDFLAGS)
# Programs linked against the cudart stand-in: runtime_prog; query_prog (pointer queries and
# memory for others), order_prog (free ordering), fork_prog (fork() and GPOOL_TRACE).
RUNTIME_PROGS := $(addprefix $(PRELOAD_TDIR)/,runtime_prog query_prog order_prog fork_prog)
# hot_prog: the cached cudaMalloc/cudaFree pair stays in gpool's thread cache (test_preload_hot)
RUNTIME_PROGS += $(PRELOAD_TDIR)/hot_prog
$(RUNTIME_PROGS): $(PRELOAD_TDIR)/%: $(BUILD)/obj/tests/preload/%.o $(PRELOAD_TDIR)/libcudart.so.13
	$(CC) -o $@ $< $(PRELOAD_TDIR)/libcudart.so.13 -Wl,-rpath,'$$ORIGIN' $(LDFLAGS) -ldl -lpthread
$(PRELOAD_TDIR)/driver_prog: $(BUILD)/obj/tests/preload/driver_prog.o
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LDFLAGS) -ldl
# Linked with -lcuda (the simulator, found through its rpath): call the driver by its names
# (direct_prog; query_direct: pointer queries; streams_prog: streams destroyed with work queued,
# graph capture).
LINKED_PROGS := $(addprefix $(PRELOAD_TDIR)/,direct_prog query_direct streams_prog)
$(LINKED_PROGS): $(PRELOAD_TDIR)/%: $(BUILD)/obj/tests/preload/%.o $(SIMLIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(SIMLIB) -Wl,-rpath,'$$ORIGIN/../../sim' $(LDFLAGS) -ldl
# dlsym(RTLD_NEXT) through the interposed dlsym: libnext_wrap's next_value() wraps libnext_base's.
$(PRELOAD_TDIR)/libnext_base.so: $(BUILD)/obj/tests/preload/next_base.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libnext_base.so -o $@ $< $(LDFLAGS)
$(PRELOAD_TDIR)/libnext_wrap.so: $(BUILD)/obj/tests/preload/next_wrap.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libnext_wrap.so -o $@ $< $(LDFLAGS) -ldl
$(PRELOAD_TDIR)/next_prog: $(BUILD)/obj/tests/preload/next_prog.o $(PRELOAD_TDIR)/libnext_wrap.so $(PRELOAD_TDIR)/libnext_base.so
	$(CC) -o $@ $< -Wl,--no-as-needed $(PRELOAD_TDIR)/libnext_wrap.so \
	  $(PRELOAD_TDIR)/libnext_base.so -Wl,--as-needed -Wl,-rpath,'$$ORIGIN' $(LDFLAGS) -ldl

$(filter $(BUILD)/tests/test_preload%,$(TEST_BIN)): | $(PRELOAD_LIB) $(PRELOAD_HELPERS) $(SIMLIB) $(BUILD)/gpool-bench \
  $(BUILD)/bench/dropin_client $(BUILD)/bench/dropin_replay
# test_preload_conf runs examples/training_step under the interposer
$(BUILD)/tests/test_preload_conf: | examples
# Programs linked with both the simulator (driver entry points by name, as a -lcuda program)
# and the cudart stand-in (the runtime's memory calls), each with the test that runs it:
#   adv_prog      tests/test_preload_adversarial.c       the adversarial campaign
#   adv2_prog     tests/test_preload_adversarial2.c      a second outside campaign
#   adv3_prog     tests/test_preload_adversarial3.c      a third outside campaign
#   adv4_prog     tests/test_preload_adversarial4.c      a fourth outside campaign
#   ipc_prog      tests/test_preload_ipc.c               CUDA IPC between a producer and its
#                                                        forked consumers
#   ipc_adv_prog  tests/test_preload_ipc_adversarial.c   an outsider's IPC checks
LINKED_PROGS := $(addprefix $(PRELOAD_TDIR)/,adv_prog adv2_prog adv3_prog adv4_prog ipc_prog ipc_adv_prog)
PRELOAD_HELPERS += $(LINKED_PROGS)
$(LINKED_PROGS): $(PRELOAD_TDIR)/%: $(BUILD)/obj/tests/preload/%.o $(PRELOAD_TDIR)/libcudart.so.13 $(SIMLIB)
	$(CC) -o $@ $< $(PRELOAD_TDIR)/libcudart.so.13 $(SIMLIB) -Wl,-rpath,'$$ORIGIN' \
	  -Wl,-rpath,'$$ORIGIN/../../sim' $(LDFLAGS) -ldl -lpthread
# (PRELOAD_HELPERS' order-only line above is expanded before this +=: name them here too)
$(BUILD)/tests/test_preload_adversarial: | $(PRELOAD_TDIR)/adv_prog
$(BUILD)/tests/test_preload_adversarial2: | $(PRELOAD_TDIR)/adv2_prog
$(BUILD)/tests/test_preload_adversarial3: | $(PRELOAD_TDIR)/adv3_prog
$(BUILD)/tests/test_preload_adversarial4: | $(PRELOAD_TDIR)/adv4_prog
$(BUILD)/tests/test_preload_ipc: | $(PRELOAD_TDIR)/ipc_prog
$(BUILD)/tests/test_preload_ipc_adversarial: | $(PRELOAD_TDIR)/ipc_adv_prog
