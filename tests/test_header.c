/* The public header as a reference (issue 24): what include/gpool.h declares and documents
 * holds. The enum-typed configuration fields keep the 0.2 ABI (the size, alignment and
 * offsets an int field had); and the errors the header lists for gpool_record_stream and
 * gpool_free -- corrected in 0.3.0 -- are the ones the calls return, on the simulated driver.
 * Stream creation goes through the simulator, so on a real GPU the record_stream tests skip. */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

/* gpool_config as laid out before the enum types: int fields (0.3.0 added reserved1, ipc). */
typedef struct config_with_ints {
    size_t struct_size;
    int device;
    size_t release_threshold;
    size_t tcache_bytes;
    size_t small_max;
    size_t budget[GPOOL_MEM_KIND_SLOTS];
    size_t va_reserve;
    int verbose;
    gpool_stream_t default_stream;
    const char *trace_path;
    int peer_access;
    int reserved0;
    int stream_reuse;
    int reserved1;
    int ipc;
} config_with_ints;

#define IS_TYPE(x, T) _Generic((x), T : 1, default : 0)

Test(header, config_enum_fields_have_their_enum_types)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_expect(IS_TYPE(cfg.peer_access, gpool_peer_access), "peer_access is a gpool_peer_access");
    cr_expect(IS_TYPE(cfg.stream_reuse, gpool_stream_reuse),
              "stream_reuse is a gpool_stream_reuse");
    /* gpool_set_peer_access takes the enum too (issue 24: it took an int) */
    gpool_status (*set)(gpool_t *, gpool_peer_access) = gpool_set_peer_access;
    cr_expect_not_null(set);
}

Test(header, config_enum_fields_keep_the_int_abi)
{
    cr_assert_eq(sizeof(gpool_peer_access), sizeof(int));
    cr_assert_eq(sizeof(gpool_stream_reuse), sizeof(int));
    cr_assert_eq(alignof(gpool_peer_access), alignof(int));
    cr_assert_eq(alignof(gpool_stream_reuse), alignof(int));
    cr_assert_eq(sizeof(gpool_config), sizeof(config_with_ints));
    cr_assert_eq(offsetof(gpool_config, peer_access), offsetof(config_with_ints, peer_access));
    cr_assert_eq(offsetof(gpool_config, reserved0), offsetof(config_with_ints, reserved0));
    cr_assert_eq(offsetof(gpool_config, stream_reuse), offsetof(config_with_ints, stream_reuse));
    /* what an int-era caller wrote reads back as the enumerator */
    config_with_ints old;
    memset(&old, 0, sizeof old);
    old.struct_size = sizeof(gpool_config);
    old.peer_access = 1;
    old.stream_reuse = 1;
    gpool_config cfg;
    memcpy(&cfg, &old, sizeof cfg);
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_NONE);
    cr_assert_eq(cfg.stream_reuse, GPOOL_STREAM_REUSE_EVENTS);
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=all,stream_reuse=wait"), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_ALL);
    cr_assert_eq(cfg.stream_reuse, GPOOL_STREAM_REUSE_WAIT);
}

/* ---------- gpool_record_stream's and gpool_free's documented errors ---------- */

enum { OTHER_STREAMS = 9 };
static gpool_t *pool;
static CUstream streams[OTHER_STREAMS];
static const struct sim_api *sim;

static void setup(void)
{
    NEED_SIM();
    sim = sim_api();
    cr_assert_not_null(sim);
    pool = test_pool(NULL);
    cr_assert_not_null(pool);
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < OTHER_STREAMS; i++)
        cr_assert_eq(mk(&streams[i], 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    for (int i = 0; i < OTHER_STREAMS; i++)
        teardown_expect(gpool_stream_release(pool, streams[i]) == GPOOL_OK, "%s",
                        gpool_last_error());
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < OTHER_STREAMS; i++)
        destroy(streams[i]);
    release(0);
    teardown_end();
}

/* "Cost: no driver call"; "GPOOL_ERR_INVALID_ARG ... already recorded on 8 other streams";
 * "GPOOL_ERR_INVALID_POINTER ptr is not the start of a live block" (the header listed
 * GPOOL_ERR_DRIVER for an event recording that record_stream never makes). */
Test(header_errors, record_stream_errors_are_the_documented_ones, .init = setup, .fini = teardown)
{
    for (size_t size = 4096; size <= 4 * MiB; size *= 1024) { /* a small and a large block */
        void *p = NULL;
        cr_assert_eq(gpool_alloc(pool, size, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
        gpool_stats before = GPOOL_STATS_INIT, after = GPOOL_STATS_INIT;
        gpool_get_stats(pool, &before);
        for (int i = 0; i < OTHER_STREAMS - 1; i++)
            cr_assert_eq(gpool_record_stream(pool, p, streams[i]), GPOOL_OK, "%s",
                         gpool_last_error());
        /* the same stream again, and the block's own stream, change nothing */
        cr_assert_eq(gpool_record_stream(pool, p, streams[0]), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_record_stream(pool, p, NULL), GPOOL_OK, "%s", gpool_last_error());
        gpool_get_stats(pool, &after);
        cr_expect_eq(after.driver_calls_total, before.driver_calls_total,
                     "record_stream made driver calls");
        cr_assert_eq(gpool_record_stream(pool, p, streams[OTHER_STREAMS - 1]),
                     GPOOL_ERR_INVALID_ARG, "a ninth other stream");
        cr_expect(strstr(gpool_last_error(), "gpool_record_stream"), "%s", gpool_last_error());
        cr_assert_eq(gpool_record_stream(pool, (char *)p + 256, streams[0]),
                     GPOOL_ERR_INVALID_POINTER, "inside the block");
        cr_assert_eq(gpool_record_stream(NULL, p, streams[0]), GPOOL_ERR_INVALID_ARG);
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_record_stream(pool, p, streams[0]), GPOOL_ERR_INVALID_POINTER,
                     "a freed block");
    }
}

/* gpool_free: "ptr was not handed out by this pool, is inside a block rather than at its
 * start, or was already freed; nothing changes". */
Test(header_errors, free_of_an_inner_pointer_is_invalid_and_changes_nothing, .init = setup,
     .fini = teardown)
{
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats before = GPOOL_STATS_INIT, after = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &before);
    cr_assert_eq(gpool_free(pool, (char *)p + 4096), GPOOL_ERR_INVALID_POINTER);
    gpool_get_stats(pool, &after);
    cr_assert_eq(after.kind[GPOOL_MEM_DEVICE].live_blocks,
                 before.kind[GPOOL_MEM_DEVICE].live_blocks);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER, "a double free");
}
