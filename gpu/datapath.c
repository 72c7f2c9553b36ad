/* gpu-datapath — checks the data path on a real GPU: a kernel (PTX text, JIT-compiled by the
 * driver with cuModuleLoadData: no nvcc at run time) writes a byte pattern into a vidmem, a
 * pinned and a mapped gpool block, and the host verifies every byte (vidmem through
 * cuMemcpyDtoH, host kinds directly). With two or more GPUs it also copies between gpool
 * blocks on devices 0 and 1 and verifies the bytes.
 *   gpu-datapath [--print-ptx]
 * Prints one markdown line per check ("- PASS ...", "- FAIL ...", "- SKIP ..."); exit status 0
 * when nothing failed. On the simulated driver, which has no cuModuleLoadData, the kernel
 * checks SKIP with that reason and the copy paths still run. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudrv.h"
#include "gpool.h"

/* out[i] = (uint8_t)(i * 7 + seed) for i < n, grid-stride loop. */
static const char fill_ptx[] = ".version 6.0\n"
                               ".target sm_50\n"
                               ".address_size 64\n"
                               "\n"
                               ".visible .entry gpool_fill(\n"
                               "    .param .u64 p_out,\n"
                               "    .param .u64 p_n,\n"
                               "    .param .u32 p_seed\n"
                               ")\n"
                               "{\n"
                               "    .reg .pred %p<2>;\n"
                               "    .reg .b32 %r<10>;\n"
                               "    .reg .b64 %rd<8>;\n"
                               "    ld.param.u64 %rd1, [p_out];\n"
                               "    ld.param.u64 %rd2, [p_n];\n"
                               "    ld.param.u32 %r1, [p_seed];\n"
                               "    cvta.to.global.u64 %rd3, %rd1;\n"
                               "    mov.u32 %r2, %ctaid.x;\n"
                               "    mov.u32 %r3, %ntid.x;\n"
                               "    mov.u32 %r4, %tid.x;\n"
                               "    mad.lo.u32 %r5, %r2, %r3, %r4;\n"
                               "    cvt.u64.u32 %rd4, %r5;\n"
                               "    mov.u32 %r6, %nctaid.x;\n"
                               "    mul.lo.u32 %r7, %r6, %r3;\n"
                               "    cvt.u64.u32 %rd5, %r7;\n"
                               "LOOP:\n"
                               "    setp.ge.u64 %p1, %rd4, %rd2;\n"
                               "    @%p1 bra DONE;\n"
                               "    cvt.u32.u64 %r8, %rd4;\n"
                               "    mul.lo.u32 %r8, %r8, 7;\n"
                               "    add.u32 %r9, %r8, %r1;\n"
                               "    add.s64 %rd6, %rd3, %rd4;\n"
                               "    st.global.u8 [%rd6], %r9;\n"
                               "    add.s64 %rd4, %rd4, %rd5;\n"
                               "    bra LOOP;\n"
                               "DONE:\n"
                               "    ret;\n"
                               "}\n";

static cudrv D;
static int failures;

static void line(const char *verdict, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *verdict, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("- %s ", verdict);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!strcmp(verdict, "FAIL")) failures++;
}

static size_t verify(const unsigned char *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 7 + seed)) return i;
    return n;
}

/* Launch the fill kernel on dptr (n bytes) and wait. */
static CUresult fill(CUfunction f, CUdeviceptr dptr, size_t n, uint32_t seed)
{
    uint64_t out = dptr, len = n;
    void *args[] = {&out, &len, &seed};
    CUresult r = D.cuLaunchKernel(f, 120, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    if (r != CUDA_SUCCESS) return r;
    return D.cuCtxSynchronize();
}

static void check_kind(gpool_t *pool, CUfunction f, gpool_mem_kind kind, const char *label,
                       size_t n, uint32_t seed)
{
    gpool_alloc_params prm = {.kind = kind};
    void *p = NULL;
    gpool_status st = gpool_alloc(pool, n, &prm, &p);
    if (st == GPOOL_ERR_UNSUPPORTED) {
        line("SKIP", "%s: gpool does not support this kind here: %s", label, gpool_last_error());
        return;
    }
    if (st != GPOOL_OK) {
        line("FAIL", "%s: gpool_alloc(%zu): %s", label, n, gpool_last_error());
        return;
    }
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    if (gpool_get_block_desc(pool, p, &d) != GPOOL_OK) {
        /* without it the kernel would write through an uninitialised address */
        line("FAIL", "%s: gpool_block_info: %s", label, gpool_last_error());
        gpool_free(pool, p);
        return;
    }
    CUdeviceptr dptr = d.device_ptr ? (CUdeviceptr)d.device_ptr : (CUdeviceptr)(uintptr_t)p;
    unsigned char *host = kind == GPOOL_MEM_DEVICE ? malloc(n) : (unsigned char *)d.host_ptr;
    if (!host) host = p;
    if (!f) {
        /* no kernel: at least a host -> block -> host round trip through the driver */
        unsigned char *src = malloc(n), *dst = kind == GPOOL_MEM_DEVICE ? host : malloc(n);
        for (size_t i = 0; i < n; i++)
            src[i] = (unsigned char)(i * 7 + seed);
        CUresult r = D.cuMemcpyHtoD(dptr, src, n);
        if (r == CUDA_SUCCESS) r = D.cuMemcpyDtoH(dst, dptr, n);
        size_t bad = r == CUDA_SUCCESS ? verify(dst, n, seed) : 0;
        if (r != CUDA_SUCCESS)
            line("FAIL", "%s: copy round trip: %s", label, cudrv_err(&D, r));
        else if (bad != n)
            line("FAIL", "%s: copy round trip: byte %zu differs", label, bad);
        else
            line("PASS", "%s: %zu bytes, host -> block -> host copies (no kernel on this driver)",
                 label, n);
        free(src);
        if (dst != host) free(dst);
    } else {
        memset(host, 0, n);
        CUresult r = kind == GPOOL_MEM_DEVICE ? D.cuMemcpyHtoD(dptr, host, n) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) r = fill(f, dptr, n, seed);
        if (r == CUDA_SUCCESS && kind == GPOOL_MEM_DEVICE) r = D.cuMemcpyDtoH(host, dptr, n);
        size_t bad = r == CUDA_SUCCESS ? verify(host, n, seed) : 0;
        if (r != CUDA_SUCCESS)
            line("FAIL", "%s: kernel into %#llx: %s", label, (unsigned long long)dptr,
                 cudrv_err(&D, r));
        else if (bad != n)
            line("FAIL", "%s: kernel wrote %zu bytes, byte %zu is %u (expected %u)", label, n, bad,
                 host[bad], (unsigned char)(bad * 7 + seed));
        else
            line("PASS", "%s: kernel wrote %zu bytes at %#llx, host verified every byte", label, n,
                 (unsigned long long)dptr);
    }
    if (kind == GPOOL_MEM_DEVICE) free(host);
    st = gpool_free(pool, p);
    if (st != GPOOL_OK) line("FAIL", "%s: gpool_free: %s", label, gpool_last_error());
}

static void check_peer(int ndev)
{
    if (ndev < 2) {
        line("SKIP", "peer: one device only");
        return;
    }
    int can = 0;
    CUdevice d0, d1;
    D.cuDeviceGet(&d0, 0);
    D.cuDeviceGet(&d1, 1);
    if (D.cuDeviceCanAccessPeer) D.cuDeviceCanAccessPeer(&can, d0, d1);
    gpool_config c0 = GPOOL_CONFIG_INIT, c1 = GPOOL_CONFIG_INIT;
    c1.device = 1;
    gpool_t *p0 = NULL, *p1 = NULL;
    if (gpool_create(&c0, &p0) != GPOOL_OK || gpool_create(&c1, &p1) != GPOOL_OK) {
        line("FAIL", "peer: gpool_create: %s", gpool_last_error());
        if (p0) gpool_destroy(p0);
        return;
    }
    size_t n = 8 << 20;
    void *a = NULL, *b = NULL;
    unsigned char *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 7 + 5);
    CUresult r = CUDA_SUCCESS;
    if (gpool_alloc(p0, n, NULL, &a) != GPOOL_OK || gpool_alloc(p1, n, NULL, &b) != GPOOL_OK) {
        line("FAIL", "peer: gpool_alloc: %s", gpool_last_error());
    } else {
        r = D.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)a, buf, n);
        if (r == CUDA_SUCCESS)
            r = D.cuMemcpy((CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)a, n);
        memset(buf, 0, n);
        if (r == CUDA_SUCCESS) r = D.cuMemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)b, n);
        size_t bad = r == CUDA_SUCCESS ? verify(buf, n, 5) : 0;
        if (r != CUDA_SUCCESS)
            line("FAIL", "peer: device 0 -> device 1 copy: %s", cudrv_err(&D, r));
        else if (bad != n)
            line("FAIL", "peer: device 0 -> device 1 copy: byte %zu differs", bad);
        else
            line("PASS",
                 "peer: 8 MiB gpool block copied device 0 -> device 1 and verified "
                 "(cuDeviceCanAccessPeer: %d)",
                 can);
    }
    if (a) gpool_free(p0, a);
    if (b) gpool_free(p1, b);
    free(buf);
    gpool_destroy(p0);
    gpool_destroy(p1);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print-ptx")) {
        fputs(fill_ptx, stdout);
        return 0;
    }
    char err[512];
    if (cudrv_load(&D, err, sizeof err) != 0) {
        fprintf(stderr, "gpu-datapath: %s\n", err);
        return 1;
    }
    int ndev = 0;
    D.cuDeviceGetCount(&ndev);
    CUdevice dev;
    CUcontext ctx;
    if (ndev < 1 || D.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        D.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "gpu-datapath: cannot open device 0\n");
        return 1;
    }
    int sim = cudrv_is_sim(&D);
    printf("### Data path%s\n\n", sim ? " (SIMULATED driver: no kernels)" : "");
    CUmodule mod = NULL;
    CUfunction f = NULL;
    if (!D.cuModuleLoadData || !D.cuModuleGetFunction || !D.cuLaunchKernel) {
        line("SKIP", "kernel: driver %s has no cuModuleLoadData/cuLaunchKernel%s", D.path,
             sim ? " (the simulated driver runs no kernels)" : "");
    } else {
        /* with the JIT's error log when the driver has cuModuleLoadDataEx: a PTX that does not
         * compile then says why */
        char jit_log[2048] = "";
        CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *vals[] = {jit_log, (void *)(uintptr_t)(sizeof jit_log - 1)};
        CUresult r = D.cuModuleLoadDataEx ? D.cuModuleLoadDataEx(&mod, fill_ptx, 2, opts, vals)
                                          : D.cuModuleLoadData(&mod, fill_ptx);
        if (r == CUDA_SUCCESS) r = D.cuModuleGetFunction(&f, mod, "gpool_fill");
        if (r != CUDA_SUCCESS) {
            for (char *c = jit_log; *c; c++)
                if (*c == '\n') *c = ' '; /* one markdown line */
            line("FAIL", "kernel: loading the PTX: %s%s%s", cudrv_err(&D, r), *jit_log ? ": " : "",
                 jit_log);
            f = NULL;
        } else {
            line("PASS", "kernel: PTX JIT-compiled and loaded (%s)",
                 D.cuModuleLoadDataEx ? "cuModuleLoadDataEx" : "cuModuleLoadData");
        }
    }
    gpool_t *pool = NULL;
    if (gpool_create(NULL, &pool) != GPOOL_OK) {
        line("FAIL", "gpool_create: %s", gpool_last_error());
    } else {
        check_kind(pool, f, GPOOL_MEM_DEVICE, "vidmem 8 MiB", 8 << 20, 11);
        check_kind(pool, f, GPOOL_MEM_DEVICE, "vidmem 300 B (small)", 300, 12);
        check_kind(pool, f, GPOOL_MEM_HOST_PINNED, "pinned 1 MiB", 1 << 20, 13);
        check_kind(pool, f, GPOOL_MEM_HOST_MAPPED, "mapped 3 MiB", 3 << 20, 14);
        gpool_status st = gpool_destroy(pool);
        if (st != GPOOL_OK) line("FAIL", "gpool_destroy: %s", gpool_last_error());
    }
    check_peer(ndev);
    if (mod) D.cuModuleUnload(mod);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(dev);
    printf("\n");
    return failures ? 1 : 0;
}
