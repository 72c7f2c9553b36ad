# record.mk — the PyTorch trace recorder (tools/torch-trace), included by the main Makefile.
#   make recorder   build/tools/gpool-record.so (LD_PRELOAD shim) and its test client
# Both build without sanitizers: the shim is preloaded into programs (python3, the client)
# that are not built with them.

RECORD_SO     := $(BUILD)/tools/gpool-record.so
RECORD_CLIENT := $(BUILD)/tools/record_client

.PHONY: recorder
recorder: $(RECORD_SO) $(RECORD_CLIENT)

$(RECORD_SO): tools/torch-trace/record.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -g -fPIC $(WARN) -D_GNU_SOURCE -shared -o $@ $< -ldl -pthread

$(RECORD_CLIENT): tools/torch-trace/record_client.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -g $(WARN) -D_GNU_SOURCE -o $@ $<

# tests/test_record.c runs the client under the shim.
test: recorder
$(BUILD)/tests/test_record: | recorder
