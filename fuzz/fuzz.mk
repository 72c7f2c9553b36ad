# fuzz.mk — libFuzzer targets (clang), included by the main Makefile.
#   make fuzz            build, then run each target for FUZZ_SECONDS (default 60) on its corpus
#   make fuzz-build      only build build/fuzz/fuzz_{ops,trace,conf}
#   make fuzz-regress    run each target once over its seed corpus and fuzz/crashes/ (fast)
# The library, simulator and bench harness are rebuilt for fuzzing in their own tree
# (build/fuzz: clang -O1, -fsanitize=fuzzer-no-link,address,undefined); the targets link with
# -fsanitize=fuzzer,address,undefined. New corpus entries go to build/fuzz/corpus/<target>
# (the committed seeds in fuzz/corpus/ are read only); crashes are written to
# build/fuzz/artifacts/. Minimise one with
#   build/fuzz/fuzz_ops -minimize_crash=1 -runs=20000 CRASH
# and commit it under fuzz/crashes/<target>/ as a regression seed.

FUZZ_CC      ?= clang
FUZZ_BUILD   := build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   ?=
FUZZ_TARGETS := fuzz_ops fuzz_trace fuzz_conf
FUZZ_LIBS    := $(LIBS)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -O1 -g $(WARN) -D_GNU_SOURCE -Iinclude $(addprefix -I,$(SRC_DIRS)) -Ibench -Itests \
                -isystem $(CUDA_HOME)/include
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)
FUZZ_SIM     := $(abspath $(FUZZ_BUILD)/sim/libcuda.so.1)
FUZZ_SKIP    ?=
FUZZ_ENV     := GPOOL_LIBCUDA=$(FUZZ_SIM) GPOOL_FUZZ_SKIP=$(FUZZ_SKIP) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-build fuzz-lib fuzz-regress

# The instrumented library objects: a recursive make into the fuzz tree (its own .d files).
fuzz-lib:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) OPT=-O1 \
	  SAN="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" lib sim $(FUZZ_BUILD)/libgpoolbench.a \
	  $(FUZZ_BUILD)/obj/tests/util_sim.o $(FUZZ_BUILD)/obj/tests/util_pool.o \
	  $(FUZZ_BUILD)/obj/tests/util_model.o

$(FUZZ_BUILD)/fuzz_ops: fuzz/fuzz_ops.c fuzz-lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< \
	  $(FUZZ_BUILD)/obj/tests/util_sim.o $(FUZZ_BUILD)/obj/tests/util_pool.o \
	  $(FUZZ_BUILD)/obj/tests/util_model.o $(FUZZ_BUILD)/libgpool.a -pthread $(FUZZ_LIBS)
$(FUZZ_BUILD)/fuzz_trace: fuzz/fuzz_trace.c fuzz-lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< \
	  $(FUZZ_BUILD)/libgpoolbench.a $(FUZZ_BUILD)/libgpool.a -pthread $(FUZZ_LIBS)
$(FUZZ_BUILD)/fuzz_conf: fuzz/fuzz_conf.c fuzz-lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< \
	  $(FUZZ_BUILD)/libgpool.a -pthread $(FUZZ_LIBS)

fuzz-build: $(FUZZ_BINS)

# Each target: FUZZ_SECONDS of fuzzing; fails on the first crash (input in artifacts/, log in
# build/fuzz/<target>.log).
fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  c=$(FUZZ_BUILD)/corpus/$$t; mkdir -p $$c; \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  if $(FUZZ_ENV) $(FUZZ_BUILD)/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=25 \
	    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	    $(FUZZ_FLAGS) $$c fuzz/corpus/$$t $$(test -d fuzz/crashes/$$t && echo fuzz/crashes/$$t) \
	    >$(FUZZ_BUILD)/$$t.log 2>&1; then \
	    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added)' \
	      $(FUZZ_BUILD)/$$t.log; \
	  else \
	    tail -60 $(FUZZ_BUILD)/$$t.log; echo "!! $$t failed (log: $(FUZZ_BUILD)/$$t.log)"; fail=1; \
	  fi; \
	done; exit $$fail

# Replay the committed seeds and crash regressions once (no fuzzing): seconds.
fuzz-regress: fuzz-build
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  files=$$(find fuzz/corpus/$$t fuzz/crashes/$$t -type f 2>/dev/null); \
	  echo "== $$t: $$(echo $$files | wc -w) inputs"; \
	  $(FUZZ_ENV) $(FUZZ_BUILD)/$$t -runs=1 $$files >/dev/null 2>$(FUZZ_BUILD)/$$t-regress.log \
	    || { tail -40 $(FUZZ_BUILD)/$$t-regress.log; fail=1; }; \
	done; exit $$fail
