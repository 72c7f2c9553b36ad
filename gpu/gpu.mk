# gpu.mk — real-GPU checks, included by the main Makefile.
#   make gpu-check       on a machine with an NVIDIA GPU and driver: build everything, run the
#                        suite against the real libcuda.so.1, benchmarks, the data-path check,
#                        the PyTorch/CuPy checks; markdown summary in $(GPU_CHECK_OUT)
#                        (default build/gpu-check.md); non-zero exit on any failure. Without a
#                        GPU it stops at once with "no NVIDIA GPU/driver found".
#   make gpu-tools       build/gpu/gpu-latency and build/gpu/gpu-datapath only
#   make gpu-sim-smoke   run both tools on the simulated driver (kernels skip there) and, when
#                        ptxas is installed, assemble the data-path PTX
#
# Machines without a package manager: scripts/stage-deps.sh downloads the Debian packages of
# the dependencies (jemalloc, hwloc, criterion and what they need) and unpacks them into .deps/
# (git-ignored). Then point the build at it:
#   make gpu-check DEPS_PREFIX=$PWD/.deps
# DEPS_PREFIX adds -isystem $(DEPS_PREFIX)/usr/include to CPPFLAGS, -L and -rpath of its
# library directory to LDFLAGS, and that directory to LD_LIBRARY_PATH for everything make runs
# (equivalently by hand: EXTRA_CPPFLAGS="-isystem .deps/usr/include"
# EXTRA_LDFLAGS="-L.deps/usr/lib/x86_64-linux-gnu -Wl,-rpath,$PWD/.deps/usr/lib/x86_64-linux-gnu"
# and export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu). The CUDA headers still come
# from CUDA_HOME; build on a machine that has them and copy the tree if the GPU host has none.

GPU_BUILD     := $(BUILD)/gpu
GPU_TOOLS     := $(GPU_BUILD)/gpu-latency $(GPU_BUILD)/gpu-datapath $(GPU_BUILD)/gpu-drvcost
GPU_TOOLS     += $(GPU_BUILD)/gpu-ipc # two-process IPC check (gpu/ipc.c, docs/ipc.md)
GPU_CHECK_OUT ?= build/gpu-check.md

ifneq ($(DEPS_PREFIX),)
DEPS_LIBDIR := $(DEPS_PREFIX)/usr/lib/$(shell $(CC) -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
CPPFLAGS    += -isystem $(DEPS_PREFIX)/usr/include
LDFLAGS     += -L$(DEPS_LIBDIR) -Wl,-rpath,$(DEPS_LIBDIR)
export LD_LIBRARY_PATH := $(DEPS_LIBDIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
export CPATH := $(DEPS_PREFIX)/usr/include$(if $(CPATH),:$(CPATH))
export LIBRARY_PATH := $(DEPS_LIBDIR)$(if $(LIBRARY_PATH),:$(LIBRARY_PATH))
endif

.PHONY: gpu-check gpu-tools gpu-sim-smoke

$(GPU_BUILD)/gpu-%: $(BUILD)/obj/gpu/%.o $(BUILD)/obj/gpu/cudrv.o $(BUILD)/libgpool.a
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(BUILD)/obj/gpu/cudrv.o $(BUILD)/libgpool.a $(LDFLAGS) $(LIBS)

gpu-tools: $(GPU_TOOLS)

gpu-sim-smoke: $(GPU_TOOLS) $(SIMLIB)
	GPOOL_LIBCUDA=$(abspath $(SIMLIB)) $(GPU_BUILD)/gpu-latency --iters 50
	GPOOL_LIBCUDA=$(abspath $(SIMLIB)) $(GPU_BUILD)/gpu-datapath
	GPOOL_LIBCUDA=$(abspath $(SIMLIB)) $(GPU_BUILD)/gpu-drvcost --iters 20
	@if command -v ptxas >/dev/null 2>&1 || test -x $(CUDA_HOME)/bin/ptxas; then \
	  PTXAS=$$(command -v ptxas || echo $(CUDA_HOME)/bin/ptxas); \
	  $(GPU_BUILD)/gpu-datapath --print-ptx > $(GPU_BUILD)/fill.ptx && \
	  $$PTXAS -arch=sm_90 $(GPU_BUILD)/fill.ptx -o $(GPU_BUILD)/fill.cubin && \
	  echo "ptxas: the data-path PTX assembles for sm_90"; \
	else echo "ptxas not found: PTX not assembled here"; fi

gpu-check:
	@GPU_CHECK_OUT="$(GPU_CHECK_OUT)" BUILD="$(BUILD)" DEPS_PREFIX="$(DEPS_PREFIX)" \
	  MAKE="$(MAKE)" scripts/gpu-check.sh

# keep the tool objects (intermediate files of the pattern rule above)
.SECONDARY: $(BUILD)/obj/gpu/latency.o $(BUILD)/obj/gpu/datapath.o $(BUILD)/obj/gpu/cudrv.o \
            $(BUILD)/obj/gpu/drvcost.o
