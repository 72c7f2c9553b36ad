# gpool — build, test and benchmark. `make` builds the libraries, `make test` runs the suite.
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
BUILD     ?= build
OPT       ?= -O2
SAN       ?=
WARN      := -Wall -Wextra -Werror -Wshadow
# src/ is grouped by layer (src/README.md); every folder is on the include path
SRC_DIRS  := $(sort $(patsubst %/,%,$(dir $(wildcard src/*/*.[ch]))))
CPPFLAGS  := -Iinclude $(addprefix -I,$(SRC_DIRS)) -isystem $(CUDA_HOME)/include -D_GNU_SOURCE $(EXTRA_CPPFLAGS)
# `make GPOOL_DEBUG=1 ...` (or `make test-debug`): the library checks its invariants at every
# operation boundary and asserts its preconditions, aborting with a message (src/placement/check.h).
ifneq ($(GPOOL_DEBUG),)
CPPFLAGS  += -DGPOOL_DEBUG=1
endif
CFLAGS    := -std=c11 $(OPT) -g -fPIC -pthread $(WARN) $(SAN) $(EXTRA_CFLAGS)
LDFLAGS   := -pthread $(SAN) $(EXTRA_LDFLAGS)
LIBS      := -ldl -lm -ljemalloc -lhwloc
# libgpool.so links no jemalloc (its STATIC_TLS would keep it out of a running process's dlopen);
# executables (tests, gpool-bench) keep it: the hot-path benchmark compares with it. Nor libm:
# the library calls none of it (without --as-needed, clang's link would still name it NEEDED).
SO_LIBS   := $(filter-out -ljemalloc -lm,$(LIBS))

LIB_SRC   := $(sort $(wildcard src/*/*.c))
SIM_SRC   := $(sort $(wildcard sim/*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_MAIN := bench/main.c
TEST_SRC  := $(sort $(wildcard tests/test_*.c))
TESTUTIL  := $(sort $(wildcard tests/util_*.c))
PRELOAD_SRC := $(sort $(wildcard preload/*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
SIM_OBJ   := $(SIM_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
TESTUTIL_OBJ := $(TESTUTIL:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

SIMLIB    := $(BUILD)/sim/libcuda.so.1
DEPS_OK   := $(BUILD)/.deps-ok

.PHONY: all lib sim tests bench test test-debug test-asan test-tsan test-valgrind clean format deps
all: lib sim $(if $(BENCH_SRC),$(BUILD)/gpool-bench)
# make bench's and make test's shell: bash (PIPESTATUS, the verdict lines)
SHELL := /bin/bash
lib: $(BUILD)/libgpool.so $(BUILD)/libgpool.a
sim: $(SIMLIB)
tests: $(TEST_BIN)

$(DEPS_OK): scripts/deps.sh
	@CC="$(CC)" CUDA_HOME="$(CUDA_HOME)" scripts/deps.sh
	@mkdir -p $(@D) && touch $@

$(BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# libgpool.so.MAJOR.MINOR.PATCH (soname libgpool.so.MAJOR), exporting only pkg/gpool.map;
# the library's own objects build with hidden visibility (GPOOL_API marks the public API).
GPOOL_VERSION := $(shell sed -n 's/^.define GPOOL_VERSION_\(MAJOR\|MINOR\|PATCH\) *//p' include/gpool.h | paste -sd.)
GPOOL_SONAME  := libgpool.so.$(firstword $(subst ., ,$(GPOOL_VERSION)))
$(BUILD)/obj/src/%.o: CFLAGS += -fvisibility=hidden
$(BUILD)/libgpool.so: $(BUILD)/libgpool.so.$(GPOOL_VERSION)
	ln -sf $(<F) $(@D)/$(GPOOL_SONAME) && ln -sf $(GPOOL_SONAME) $@
$(BUILD)/libgpool.so.$(GPOOL_VERSION): $(LIB_OBJ) pkg/gpool.map
	$(CC) -shared -Wl,-soname,$(GPOOL_SONAME) -Wl,--version-script=pkg/gpool.map -o $@ \
	  $(LIB_OBJ) $(LDFLAGS) $(SO_LIBS)
$(BUILD)/libgpool.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -Bsymbolic-functions: like the real libcuda, the simulator's own references to its entry
# points (cuGetProcAddress's table) stay its own when LD_PRELOAD defines the same names.
# The simulator shares one file with the library: the size parser (GPOOL_SIM_MEMORY).
$(SIMLIB): $(SIM_OBJ) $(BUILD)/obj/src/api/size_parse.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions -o $@ $^ $(LDFLAGS) -ldl -lrt
	@ln -sf libcuda.so.1 $(@D)/libcuda.so

$(BUILD)/gpool-bench: $(BENCH_OBJ) $(BUILD)/libgpool.a
	$(CC) -o $@ $(BENCH_OBJ) $(BUILD)/libgpool.a $(LDFLAGS) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TESTUTIL_OBJ) $(BUILD)/libgpool.a | $(SIMLIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(TESTUTIL_OBJ) $(BUILD)/libgpool.a $(LDFLAGS) $(LIBS) -lcriterion
# Test objects are intermediates of that pattern: kept, or the next make deletes and rebuilds
# every one of them (their .d files name them as targets).
.SECONDARY: $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.o)

# The threaded stress program is a plain executable (Criterion cannot run under TSan).
STRESS_BIN := $(BUILD)/tests/stress_threads
STRESS_UTIL_OBJ := $(filter-out %/util_teardown.o %/util_preload.o %/util_capture.o,$(TESTUTIL_OBJ))
$(STRESS_BIN): $(BUILD)/obj/tests/stress_threads.o $(STRESS_UTIL_OBJ) $(BUILD)/libgpool.a | $(SIMLIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(STRESS_UTIL_OBJ) $(BUILD)/libgpool.a $(LDFLAGS) $(LIBS)

# The simulated driver is a strict referee for everything run from here (tests, examples,
# benchmarks, fuzzers): the first stream-ordering violation aborts (sim/gpool_sim.h).
# `make GPOOL_SIM_STRICT=0 ...` counts violations instead.
export GPOOL_SIM_STRICT ?= 1

# Every test binary runs against the simulated driver.
TEST_ENV := GPOOL_LIBCUDA=$(abspath $(SIMLIB)) GPOOL_TEST_BUILD=$(abspath $(BUILD))
TEST_JOBS ?= 2
# Criterion ignores what fails in a suite's teardown; the teardowns leave a file in
# TEARDOWN_DIR when a check failed or they did not finish (tests/util_pool.h teardown_begin).
TEARDOWN_DIR = $(abspath $(BUILD))/teardown
# Each binary's output goes to TEST_LOGS/NAME.log (the violations and failed checks tests
# provoke on purpose stay there); one line per binary, then the checks fragments add to
# TEST_AFTER (fit-check, test-python), run after the C suite, then one verdict line.
# `make test TEST_AFTER=` runs the C suite alone.
TEST_LOGS = $(abspath $(BUILD))/test-logs
test: all $(TEST_BIN) $(STRESS_BIN)
	@rm -rf $(TEARDOWN_DIR) $(TEST_LOGS); mkdir -p $(TEARDOWN_DIR) $(TEST_LOGS); \
	fail=0; echo "== the C suite ($(words $(TEST_BIN)) Criterion binaries and the stress program; logs in $(TEST_LOGS))"; \
	GPOOL_TEST_TEARDOWN_DIR=$(TEARDOWN_DIR) $(TEST_ENV) TEST_RUNNER="$(TEST_RUNNER)" \
	  TEST_JOBS=$(TEST_JOBS) TEST_ARGS="$(TEST_ARGS)" scripts/test-suite.sh $(TEST_LOGS) \
	  $(STRESS_BIN) $(TEST_BIN) || fail=1; \
	if [ -n "$$(ls -A $(TEARDOWN_DIR))" ]; then \
	  echo "== teardowns that failed a check or did not finish:"; cat $(TEARDOWN_DIR)/*; fail=1; \
	fi; \
	after=""; for t in $(TEST_AFTER); do \
	  if $(MAKE) --no-print-directory $$t 2>&1 | tee $(TEST_LOGS)/$$t.log; [ $${PIPESTATUS[0]} = 0 ]; \
	  then after="$$after, $$t passed"; else after="$$after, $$t FAILED"; fail=1; fi; \
	done; \
	[ -f $(TEST_LOGS)/c-suite ] || { echo '0 0 0 1 0' > $(TEST_LOGS)/c-suite; fail=1; }; \
	read -r suites tests passed failed skipped < $(TEST_LOGS)/c-suite; \
	echo "make test: $$suites suites, $$tests tests: $$passed passed, $$failed failed, $$skipped skipped$$after; $$([ $$fail = 0 ] && echo PASS || echo FAIL); logs in $(TEST_LOGS)"; \
	exit $$fail

# The suite once more on a debug build (build/debug, -DGPOOL_DEBUG=1): invariant checks at
# every arena operation (src/placement/check.h).
test-debug:
	$(MAKE) test BUILD=build/debug GPOOL_DEBUG=1

# TSan: the stress program (Criterion itself aborts under TSan, Snaipe/Criterion#274).
test-stress: $(STRESS_BIN)
	$(TEST_ENV) $(STRESS_BIN)

# LeakSanitizer: Criterion's own runner keeps 48 bytes it never frees (libcriterion.so, not
# gpool); tests/lsan.supp names it and nothing else.
test-asan:
	LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0 \
	$(MAKE) test BUILD=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
test-tsan:
	$(MAKE) test-stress BUILD=build/tsan OPT=-O1 SAN="-fsanitize=thread"
test-valgrind:
	$(MAKE) test BUILD=build/valgrind OPT=-O1 TEST_JOBS=1 \
	  TEST_RUNNER="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --trace-children=yes --trace-children-skip=*/record_client,*/sh,*/bash,*/dash,*/env,*/python*,*/pyenv*,/usr/bin/*,/bin/*"

format:
	clang-format -i include/*.h src/*/*.c src/*/*.h sim/*.c sim/*.h tests/*.c tests/*.h bench/*.c bench/*.h \
	  preload/*.c preload/*.h tests/preload/*.c fuzz/*.c gpu/*.c gpu/*.h examples/*.c examples/*.h tools/*/*.c 2>/dev/null || true

# make format-check: fails when a C file is not as clang-format (the repo's .clang-format)
# would write it; skips, saying so, when clang-format is missing (.ci/run installs it). The files:
# every tracked or new (not ignored) .c/.h of the checkout, else every one outside build/.
CLANG_FORMAT ?= clang-format
FORMAT_FILES = $(shell git ls-files -co --exclude-standard '*.c' '*.h' 2>/dev/null || \
  find . -path ./build -prune -o \( -name '*.c' -o -name '*.h' \) -print)
.PHONY: format-check
format-check:
	@if ! command -v $(CLANG_FORMAT) >/dev/null 2>&1; then \
	  echo "format-check: SKIPPED: $(CLANG_FORMAT) not found (apt-get install clang-format)"; exit 0; fi; \
	files=$$(for f in $(FORMAT_FILES); do [ -f "$$f" ] && echo "$$f"; done); \
	out=$$(echo "$$files" | xargs $(CLANG_FORMAT) --dry-run -Werror 2>&1); rc=$$?; \
	bad=$$(echo "$$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u); \
	if [ $$rc != 0 ] || [ -n "$$bad" ]; then \
	  echo "format-check: not clang-formatted ($$($(CLANG_FORMAT) --version)):"; \
	  if [ -n "$$bad" ]; then echo "$$bad" | sed 's/^/  /'; echo "fix: $(CLANG_FORMAT) -i" $$bad; \
	  else echo "$$out" | head -20; fi; exit 1; fi; \
	echo "format-check: $$(echo "$$files" | wc -l) C files clang-formatted ($$($(CLANG_FORMAT) --version))"

clean:
	rm -rf build

# Each area may add its own rules (targets, extra test binaries) in a fragment.
-include $(wildcard bench/bench.mk preload/preload.mk examples/examples.mk fuzz/fuzz.mk pkg/pkg.mk gpu/gpu.mk \
  tools/torch-trace/record.mk tools/hops/hops.mk python/python.mk)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
