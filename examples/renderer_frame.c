/* renderer_frame.c — a renderer's frame loop on gpool.
 *
 * Where each kind of buffer goes:
 *   textures, render targets   GPOOL_MEM_DEVICE (vidmem): only the GPU touches them
 *   per-frame upload buffer    GPOOL_USAGE_UPLOAD: the policy picks mapped sysmem -- the CPU
 *                              writes it, the GPU reads it directly over the bus, no copy
 *   readback buffer            GPOOL_USAGE_READBACK: pinned sysmem -- the GPU copies results
 *                              into it asynchronously, the CPU reads them once the frame is done
 * FRAMES_IN_FLIGHT frames are queued at once, each on its own stream; before the CPU reuses a
 * frame slot it waits for that slot's stream. Transient per-frame buffers are allocated and
 * freed on the frame's stream, so gpool hands the same memory back frame after frame with no
 * memory call to the driver (cuMemCreate/cuMemMap/cuMemHostAlloc ...); what it does ask the
 * driver every frame is event calls (record and query on the frames' streams, to know when a
 * frame's memory is free for another stream). Every STATS_EVERY frames it prints memory in use
 * and reserved per kind, the memory calls so far (flat after the first frames) and the event
 * calls per frame since the last print.
 *
 * Build and run:  make examples && make run-examples   (on the simulated driver without a GPU)
 */
#include <cuda.h>
#include <gpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CHECK_GPOOL and CHECK_CU: exit with a message naming the failed call. */
#define EXAMPLE_NAME "renderer_frame"
#include "example_check.h"

enum { FRAMES = 120, FRAMES_IN_FLIGHT = 3, STATS_EVERY = 30, TEXTURES = 4 };
#define MiB            ((size_t)1 << 20)
#define READBACK_BYTES ((size_t)4096) /* e.g. GPU timings and the object under the mouse */

/* One frame slot: its stream and its readback buffer live as long as the renderer. */
struct frame_slot {
    CUstream stream;
    uint32_t *readback; /* pinned sysmem: a host pointer the GPU copies into */
    int frame;          /* frame whose results are in flight in this slot (-1: none) */
};

static void print_stats(gpool_t *pool, int frame)
{
    static const char *const kind_name[GPOOL_MEM_KIND_COUNT] = {"total", "vidmem", "pinned",
                                                                "mapped"};
    gpool_stats s = GPOOL_STATS_INIT;
    CHECK_GPOOL(gpool_get_stats(pool, &s));
    printf("frame %3d:", frame);
    for (int k = GPOOL_MEM_DEVICE; k < GPOOL_MEM_KIND_COUNT; k++)
        printf("  %s %.1f/%.1f MiB", kind_name[k], s.kind[k].in_use_bytes / (double)MiB,
               s.kind[k].reserved_bytes / (double)MiB);
    static uint64_t last_events;
    static int last_frame;
    uint64_t events = s.driver_calls[GPOOL_DRV_EVENT];
    uint64_t memory = s.driver_calls_total - events - s.driver_calls[GPOOL_DRV_STREAM] -
                      s.driver_calls[GPOOL_DRV_OTHER];
    printf("  (in use/reserved), memory calls %llu, event calls per frame %.1f\n",
           (unsigned long long)memory, (double)(events - last_events) / (frame - last_frame));
    last_events = events;
    last_frame = frame;
}

int main(void)
{
    gpool_t *pool;
    CHECK_GPOOL(gpool_create(NULL, &pool));
    /* gpool retains device 0's primary context; the renderer makes it current for its own
     * streams and copies. */
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));

    /* Long-lived GPU resources: textures and the render target, in vidmem (params NULL means
     * GPOOL_MEM_DEVICE). */
    void *texture[TEXTURES], *render_target;
    for (int t = 0; t < TEXTURES; t++) {
        CHECK_GPOOL(gpool_alloc(pool, (size_t)(t + 1) * 4 * MiB, NULL, &texture[t]));
        CHECK_CU(cuMemsetD32((CUdeviceptr)texture[t], 0xff00ff00u, (t + 1) * MiB)); /* "load" */
    }
    CHECK_GPOOL(gpool_alloc(pool, 1920 * 1080 * 4, NULL, &render_target));

    /* One stream and one readback buffer per frame in flight. */
    struct frame_slot slot[FRAMES_IN_FLIGHT];
    gpool_alloc_params readback_params = {.kind = GPOOL_MEM_AUTO, .usage = GPOOL_USAGE_READBACK};
    for (int i = 0; i < FRAMES_IN_FLIGHT; i++) {
        CHECK_CU(cuStreamCreate(&slot[i].stream, CU_STREAM_NON_BLOCKING));
        CHECK_GPOOL(
            gpool_alloc(pool, READBACK_BYTES, &readback_params, (void **)&slot[i].readback));
        slot[i].frame = -1;
    }

    gpool_alloc_params upload_params = {.kind = GPOOL_MEM_AUTO, .usage = GPOOL_USAGE_UPLOAD};
    int verified = 0;
    for (int frame = 0; frame < FRAMES; frame++) {
        struct frame_slot *fs = &slot[frame % FRAMES_IN_FLIGHT];

        /* 1. Wait until the GPU is done with the frame that used this slot last, then read its
         *    results back on the CPU: every word of the readback holds that frame's number. */
        CHECK_CU(cuStreamSynchronize(fs->stream));
        if (fs->frame >= 0) {
            for (size_t w = 0; w < READBACK_BYTES / 4; w++)
                if (fs->readback[w] != (uint32_t)fs->frame) {
                    fprintf(stderr, "renderer_frame: frame %d read back %u\n", fs->frame,
                            fs->readback[w]);
                    return 1;
                }
            verified++;
        }

        /* 2. Per-frame upload buffer (constants, dynamic vertices): its size changes from
         *    frame to frame. It is mapped sysmem: gpool_alloc returns the device address, and
         *    gpool_get_block_desc the host address the CPU writes through. */
        size_t upload_bytes = 256 * 1024 + (size_t)(frame % 7) * 64 * 1024;
        void *upload;
        CHECK_GPOOL(gpool_alloc_async(pool, upload_bytes, &upload_params, fs->stream, &upload));
        gpool_block_desc info = GPOOL_BLOCK_DESC_INIT;
        CHECK_GPOOL(gpool_get_block_desc(pool, upload, &info));
        uint32_t *cpu_view = info.host_ptr;
        for (size_t w = 0; w < upload_bytes / 4; w++)
            cpu_view[w] = (uint32_t)frame;

        /* 3. A transient render target for this frame only (say, a bloom buffer), freed at
         *    the end of the frame on the same stream. */
        void *bloom;
        CHECK_GPOOL(gpool_alloc_async(pool, 960 * 540 * 8, NULL, fs->stream, &bloom));

        /* 4. "Draw": the GPU reads the upload buffer straight from host memory (standing in
         *    for a draw call, a copy into the render target), then post-processes into bloom. */
        CHECK_CU(cuMemcpyDtoDAsync((CUdeviceptr)render_target, (CUdeviceptr)upload, upload_bytes,
                                   fs->stream));
        CHECK_CU(cuMemcpyDtoDAsync((CUdeviceptr)bloom, (CUdeviceptr)render_target, READBACK_BYTES,
                                   fs->stream));

        /* 5. Read results back: an async copy into pinned memory, checked in step 1 when the
         *    slot comes round again. */
        CHECK_CU(cuMemcpyDtoHAsync(fs->readback, (CUdeviceptr)bloom, READBACK_BYTES, fs->stream));
        fs->frame = frame;

        /* 6. Free the frame's transient memory in stream order: reusable at once by the next
         *    allocation on this stream, by other streams once this frame's work is done. */
        CHECK_GPOOL(gpool_free_async(pool, bloom, fs->stream));
        CHECK_GPOOL(gpool_free_async(pool, upload, fs->stream));

        if ((frame + 1) % STATS_EVERY == 0) print_stats(pool, frame + 1);
    }

    /* Drain the frames still in flight and check their results too. */
    for (int i = 0; i < FRAMES_IN_FLIGHT; i++) {
        CHECK_CU(cuStreamSynchronize(slot[i].stream));
        for (size_t w = 0; w < READBACK_BYTES / 4; w++)
            if (slot[i].readback[w] != (uint32_t)slot[i].frame) return 1;
        verified++;
        CHECK_GPOOL(gpool_free(pool, slot[i].readback));
        CHECK_CU(cuStreamDestroy(slot[i].stream));
    }
    printf("renderer_frame: %d frames rendered, %d readbacks verified\n", FRAMES, verified);

    for (int t = 0; t < TEXTURES; t++)
        CHECK_GPOOL(gpool_free(pool, texture[t]));
    CHECK_GPOOL(gpool_free(pool, render_target));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev));
    CHECK_GPOOL(gpool_destroy(pool));
    return verified == FRAMES ? 0 : 1;
}
