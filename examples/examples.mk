# examples.mk — the examples in examples/*.c, included by the main Makefile.
#   make examples       build them into $(BUILD)/examples/
#   make run-examples   run them on the simulated driver (two simulated devices)
# They link like a user's program: the shared libgpool (found next to them through an rpath)
# and the CUDA driver for their own streams and copies. The simulator has the driver's soname
# (libcuda.so.1), so it stands in at link time; at run time the real driver or, with
# LD_LIBRARY_PATH=$(BUILD)/sim, the simulator is loaded -- and gpool uses that same one.
# tests/test_examples.c runs each of them and checks its exit code and output.

EXAMPLE_SRC := $(sort $(filter-out examples/%.h,$(wildcard examples/*.c)))
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: examples run-examples
examples: $(EXAMPLE_BIN)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(BUILD)/libgpool.so $(SIMLIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< -L$(BUILD) -lgpool -L$(dir $(SIMLIB)) -lcuda -Wl,-rpath,'$$ORIGIN/..' \
	  $(LDFLAGS)

# The suite runs the examples: build them before any test binary runs.
test: examples
$(BUILD)/tests/test_examples: | examples

run-examples: examples
	@for e in $(EXAMPLE_BIN); do echo "== $$e"; \
	  GPOOL_LIBCUDA=$(abspath $(SIMLIB)) LD_LIBRARY_PATH=$(abspath $(dir $(SIMLIB))) \
	  GPOOL_SIM_DEVICES=2 $$e || exit 1; done

.SECONDARY: $(EXAMPLE_SRC:%.c=$(BUILD)/obj/%.o)
