/* multi_gpu.c — one gpool pool per GPU, and data shared by all of them.
 *
 * Each device gets its own pool (gpool_config.device) for its private data in vidmem. Data
 * that every GPU reads goes where every GPU can reach it: a request with
 * GPOOL_USAGE_MULTI_GPU lets the placement policy choose, and it picks mapped sysmem -- pinned
 * host memory mapped into every device's address space. Here each GPU computes a partial
 * result in its own vidmem and writes it into its slice of the shared block; the CPU then
 * reads the whole block. Device-to-device traffic (one GPU's vidmem copied into another's)
 * goes through cuMemcpyAsync, which takes the peer-to-peer path where the devices have one.
 *
 * Run with two simulated devices:  GPOOL_SIM_DEVICES=2 (make run-examples sets it).
 */
#include <cuda.h>
#include <gpool.h>
#include <stdio.h>
#include <stdlib.h>

/* CHECK_GPOOL and CHECK_CU: exit with a message naming the failed call. */
#define EXAMPLE_NAME "multi_gpu"
#include "example_check.h"

enum { MAX_GPUS = 8 };
#define SLICE_BYTES ((size_t)8 << 20) /* each GPU's share of the result */

/* Can device a read device b's memory directly? Looked up at run time so that the program
 * also runs on drivers without the peer API: -1 means unknown. */
static int can_access_peer(CUdevice a, CUdevice b)
{
    CUresult (*can_access)(int *, CUdevice, CUdevice) = NULL;
    CUdriverProcAddressQueryResult found;
    if (cuGetProcAddress("cuDeviceCanAccessPeer", (void **)&can_access, CUDA_VERSION,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        !can_access)
        return -1;
    int yes = 0;
    return can_access(&yes, a, b) == CUDA_SUCCESS ? yes : -1;
}

static const char *kind_name(gpool_mem_kind kind)
{
    switch (kind) {
    case GPOOL_MEM_DEVICE:
        return "vidmem";
    case GPOOL_MEM_HOST_PINNED:
        return "pinned sysmem";
    case GPOOL_MEM_HOST_MAPPED:
        return "mapped sysmem";
    default:
        return "?";
    }
}

int main(void)
{
    int ngpu;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGetCount(&ngpu));
    if (ngpu > MAX_GPUS) ngpu = MAX_GPUS;
    printf("multi_gpu: %d device(s)\n", ngpu);

    /* One pool per device; each retains its device's primary context, which we use for our
     * streams and copies on that device. */
    gpool_t *pool[MAX_GPUS];
    CUdevice dev[MAX_GPUS];
    CUcontext ctx[MAX_GPUS];
    CUstream stream[MAX_GPUS];
    for (int d = 0; d < ngpu; d++) {
        gpool_config cfg = GPOOL_CONFIG_INIT;
        CHECK_GPOOL(gpool_config_default(&cfg));
        cfg.device = d;
        CHECK_GPOOL(gpool_create(&cfg, &pool[d]));
        CHECK_CU(cuDeviceGet(&dev[d], d));
        CHECK_CU(cuDevicePrimaryCtxRetain(&ctx[d], dev[d]));
        CHECK_CU(cuCtxSetCurrent(ctx[d]));
        CHECK_CU(cuStreamCreate(&stream[d], CU_STREAM_NON_BLOCKING));
    }
    for (int a = 0; a < ngpu; a++)
        for (int b = 0; b < ngpu; b++)
            if (a != b) {
                int peer = can_access_peer(dev[a], dev[b]);
                printf("peer access %d -> %d: %s\n", a, b,
                       peer < 0 ? "unknown (driver has no cuDeviceCanAccessPeer)"
                       : peer   ? "yes"
                                : "no (copies are staged through the host)");
            }

    /* The shared block: ask for the usage, let the policy place it. Pool 0 owns it (and frees
     * it); its device pointer is valid on every device, its host pointer on the CPU. */
    gpool_alloc_params shared_params = {.kind = GPOOL_MEM_AUTO, .usage = GPOOL_USAGE_MULTI_GPU};
    void *shared;
    CHECK_GPOOL(gpool_alloc(pool[0], SLICE_BYTES * (size_t)ngpu, &shared_params, &shared));
    gpool_block_desc info = GPOOL_BLOCK_DESC_INIT;
    CHECK_GPOOL(gpool_get_block_desc(pool[0], shared, &info));
    printf("shared block: %zu MiB placed in %s by the policy\n", info.size >> 20,
           kind_name(info.kind));

    /* Each GPU: a private partial result in its own vidmem ("computed" by a memset), copied
     * into its slice of the shared block over the bus. */
    void *partial[MAX_GPUS];
    for (int d = 0; d < ngpu; d++) {
        CHECK_CU(cuCtxSetCurrent(ctx[d]));
        CHECK_GPOOL(gpool_alloc_async(pool[d], SLICE_BYTES, NULL, stream[d], &partial[d]));
        CHECK_CU(cuMemsetD32Async((CUdeviceptr)partial[d], 1000u + (unsigned)d, SLICE_BYTES / 4,
                                  stream[d]));
        CHECK_CU(cuMemcpyDtoDAsync(info.device_ptr + (CUdeviceptr)d * SLICE_BYTES,
                                   (CUdeviceptr)partial[d], SLICE_BYTES, stream[d]));
    }
    /* GPU 0 also pulls GPU 1's partial result into its own vidmem: a device-to-device copy
     * across GPUs (unified addressing tells the driver where each side lives). gpool's VMM
     * memory is reachable only by the devices its mappings were given access to: with the
     * default peer_access=auto, pool 1 gave it to every device that can reach device 1, so GPU
     * 0 reads it directly when cuDeviceCanAccessPeer(0, 1) says yes. Otherwise the copy is
     * staged through the host. */
    void *from_peer = NULL;
    if (ngpu > 1) {
        CHECK_CU(cuCtxSetCurrent(ctx[0]));
        CHECK_CU(cuStreamSynchronize(stream[1])); /* GPU 1's result must be ready */
        CHECK_GPOOL(gpool_alloc_async(pool[0], SLICE_BYTES, NULL, stream[0], &from_peer));
        if (can_access_peer(dev[0], dev[1]) == 1) {
            CHECK_CU(cuMemcpyAsync((CUdeviceptr)from_peer, (CUdeviceptr)partial[1], SLICE_BYTES,
                                   stream[0]));
        } else {
            void *staging = malloc(SLICE_BYTES);
            if (!staging) {
                fprintf(stderr, "multi_gpu: out of host memory\n");
                return 1;
            }
            CHECK_CU(cuCtxSetCurrent(ctx[1]));
            CHECK_CU(cuMemcpyDtoH(staging, (CUdeviceptr)partial[1], SLICE_BYTES));
            CHECK_CU(cuCtxSetCurrent(ctx[0]));
            CHECK_CU(cuMemcpyHtoD((CUdeviceptr)from_peer, staging, SLICE_BYTES));
            free(staging);
        }
    }
    for (int d = 0; d < ngpu; d++)
        CHECK_CU(cuStreamSynchronize(stream[d]));

    /* The CPU reads the shared block through its host pointer: every slice holds its GPU's
     * value. */
    const uint32_t *words = info.host_ptr;
    for (int d = 0; d < ngpu; d++)
        for (size_t w = 0; w < SLICE_BYTES / 4; w += 4099)
            if (words[(size_t)d * SLICE_BYTES / 4 + w] != 1000u + (unsigned)d) {
                fprintf(stderr, "multi_gpu: slice %d holds the wrong data\n", d);
                return 1;
            }
    if (from_peer) {
        uint32_t word = 0;
        CHECK_CU(cuMemcpyDtoH(&word, (CUdeviceptr)from_peer + SLICE_BYTES - 4, 4));
        if (word != 1001u) {
            fprintf(stderr, "multi_gpu: the peer copy holds %u\n", word);
            return 1;
        }
        CHECK_GPOOL(gpool_free(pool[0], from_peer));
    }
    printf("multi_gpu: %d slices of the shared block verified on the CPU%s\n", ngpu,
           ngpu > 1 ? ", peer copy 1 -> 0 verified" : "");

    /* Tear down: each block goes back to the pool that gave it out. */
    CHECK_GPOOL(gpool_free(pool[0], shared));
    for (int d = 0; d < ngpu; d++) {
        CHECK_GPOOL(gpool_free_async(pool[d], partial[d], stream[d]));
        CHECK_CU(cuCtxSetCurrent(ctx[d]));
        CHECK_CU(cuStreamSynchronize(stream[d]));
        CHECK_CU(cuStreamDestroy(stream[d]));
        CHECK_CU(cuDevicePrimaryCtxRelease(dev[d]));
        CHECK_GPOOL(gpool_destroy(pool[d]));
    }
    return 0;
}
