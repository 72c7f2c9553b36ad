#!/usr/bin/env python3
"""cupy_check.py - CuPy allocating through gpool's interposer.

CuPy (13 and later links the CUDA runtime statically) reaches the driver through dlsym and
cuGetProcAddress, which libgpool_preload.so answers with gpool's cuMemAlloc & co. This runs the
same workload twice, without and with LD_PRELOAD, with CuPy's own memory pool switched off so that
every array allocation goes to CUDA, then once more through cudaMallocAsync (MemoryAsyncPool), and
once with gpool.cupy's allocators (cupy.cuda.set_allocator(gpool.cupy.allocator),
set_pinned_memory_allocator(gpool.cupy.pinned_allocator); no LD_PRELOAD): a block allocated
inside `with cupy.cuda.Stream()` must carry that stream, and gpool must have served the run:
  - the results must match NumPy in every run;
  - under LD_PRELOAD gpool's trace (GPOOL_CONF=trace=FILE) must show the allocations, proving the
    hooks served them;
  - it prints the time per iteration of each run.
Exits 0 with a message when CuPy or a CUDA device is absent.

usage: gpu/cupy_check.py [--iters 2000] [--build build]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(iters, allocator):
    import cupy as cp
    import numpy as np

    extra = {}
    if allocator == "gpool":
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
        import gpool.cupy
        import gpool.torch

        cp.cuda.set_allocator(gpool.cupy.allocator)
        cp.cuda.set_pinned_memory_allocator(gpool.cupy.pinned_allocator)
        with cp.cuda.Stream(non_blocking=True) as side:
            x = cp.ones(1 << 20, dtype=cp.float32)
            info = gpool.torch.pool(cp.cuda.runtime.getDevice()).block_info(x.data.ptr)
            extra["follows_stream"] = info["stream"] == side.ptr
            host = cp.asnumpy(x, stream=side)  # through a pinned staging buffer
            side.synchronize()
            extra["pinned_ok"] = bool(host.sum() == (1 << 20))
            del x
    if allocator == "none":
        cp.cuda.set_allocator(None)  # every allocation is a cudaMalloc
    elif allocator == "async":
        cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)  # cudaMallocAsync
    if allocator != "gpool":
        cp.cuda.set_pinned_memory_allocator(None)
    rng = np.random.default_rng(0)
    a_host = rng.standard_normal((512, 512), dtype=np.float32)
    b_host = rng.standard_normal((512, 512), dtype=np.float32)
    expect = a_host @ b_host
    a, b = cp.asarray(a_host), cp.asarray(b_host)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for i in range(iters):
        n = 1 + (i * 7919) % (4 << 20)  # 1 B .. 4 MiB, irregular
        x = cp.empty(n, dtype=cp.uint8)
        x.fill(i & 0xFF)
        y = cp.arange(1 + i % 4096, dtype=cp.float32) * 2
        del x, y
        if i % 50 == 0:
            c = a @ b
            del c
    cp.cuda.Device().synchronize()
    elapsed = time.perf_counter() - t0
    c = (a @ b).get()
    ok = bool(np.allclose(c, expect, rtol=1e-3, atol=1e-2))
    free_b, total_b = cp.cuda.runtime.memGetInfo()
    if allocator == "gpool":
        extra["gpool_allocs"] = gpool.torch.stats(cp.cuda.runtime.getDevice())["device"]["allocs"]
        ok = ok and extra["follows_stream"] and extra["pinned_ok"] and extra["gpool_allocs"] > 0
    print("RESULT " + json.dumps({
        "allocator": allocator, "iters": iters, "us_per_iter": round(elapsed / iters * 1e6, 2),
        "matmul_ok": ok, "mem_free": free_b, "mem_total": total_b, "cupy": cp.__version__,
        **extra}), flush=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.iters, args.child)
    try:
        import cupy as cp
    except ImportError:
        print("cupy_check: skipped: CuPy is not installed")
        return 0
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("no device")
    except Exception as e:  # CUDARuntimeError when there is no driver or device
        print(f"cupy_check: skipped: no CUDA device ({e})")
        return 0
    build = os.path.abspath(args.build)
    preload = os.path.join(build, "libgpool_preload.so")
    if not os.path.exists(preload):
        print(f"cupy_check: {preload} missing (run make)")
        return 1
    failed = False
    for name, allocator, use_preload in (("cuda", "none", False), ("gpool", "none", True),
                                         ("gpool-async", "async", True),
                                         ("gpool-cupy-allocator", "gpool", False)):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.setdefault("GPOOL_LIBRARY", os.path.join(build, "libgpool.so"))
        trace = None
        if use_preload:
            fd, trace = tempfile.mkstemp(prefix="gpool-cupy-", suffix=".csv")
            os.close(fd)
            env["LD_PRELOAD"] = preload
            env["GPOOL_CONF"] = f"trace={trace}"
        cmd = [sys.executable, os.path.abspath(__file__), "--child", allocator, "--iters",
               str(args.iters)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        events = None
        if trace:
            with open(trace) as f:
                events = max(0, sum(1 for _ in f) - 1)  # minus the header
            os.unlink(trace)
        if proc.returncode != 0 or not line:
            print(f"cupy_check: {name}: failed (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
            failed = True
            continue
        r = json.loads(line[-1][7:])
        r["run"], r["gpool_trace_events"] = name, events
        print("RESULT " + json.dumps(r), flush=True)
        if use_preload and not events:
            print(f"cupy_check: {name}: gpool served no allocation: the driver hooks were not used")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
