#!/usr/bin/env python3
"""torch_check.py - train a small transformer with PyTorch three ways and compare allocators.

  native     PyTorch's own CUDA caching allocator
  preload    PYTORCH_NO_CUDA_MEMORY_CACHING=1 with LD_PRELOAD=libgpool_preload.so
             (every cudaMalloc/cudaFree served by gpool)
  pluggable  torch.cuda.memory.CUDAPluggableAllocator over libgpool.so's gpool_torch_alloc /
             gpool_torch_free
  api        gpool.torch's checks (gpu/torch_api_check.py): alloc/free, record_stream, graph
             capture + replay + eager, memory_stats, snapshot + _memory_viz, empty_cache
  mempool    torch.cuda.MemPool over gpool (gpu/torch_api_check.py), where torch has it

Each mode runs in its own process (the allocator is chosen per process). For each it prints the
median and mean step time and the peak reserved device memory: the device's used memory (NVML)
above the level measured after CUDA initialised, sampled after every step; for the native
allocator also torch.cuda.max_memory_reserved(). One `RESULT {json}` line per mode is printed
for scripts. Exits 0 with a message when torch or a CUDA device is absent.

usage: gpu/torch_check.py [--steps 300] [--build build]
                          [--modes native,preload,pluggable,api,mempool]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Nvml:
    """Device used memory through libnvidia-ml (no pynvml needed); None when unavailable."""

    class _Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    def __init__(self, index):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)) != 0:
            raise OSError("nvmlDeviceGetHandleByIndex failed")

    def used(self):
        m = self._Memory()
        if self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(m)) != 0:
            return None
        return m.used


def child(mode, steps, build):
    import torch
    import torch.nn as nn

    if mode == "pluggable":
        lib = os.path.join(build, "libgpool.so")
        alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "gpool_torch_alloc",
                                                         "gpool_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    torch.cuda.init()
    torch.empty(1, device=dev)  # context and allocator up
    torch.cuda.synchronize()
    try:
        nvml = Nvml(torch.cuda.current_device())
        baseline = nvml.used()
    except OSError:
        nvml, baseline = None, None

    vocab, d_model, seq, batch = 8192, 512, 256, 32
    layer = nn.TransformerEncoderLayer(d_model, nhead=8, dim_feedforward=2048, dropout=0.1,
                                       batch_first=True)
    model = nn.Sequential()
    model.embed = nn.Embedding(vocab, d_model)
    model.encoder = nn.TransformerEncoder(layer, num_layers=6)
    model.head = nn.Linear(d_model, vocab)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()

    times, peak_used, loss_value = [], 0, None
    for step in range(steps):
        # varying sequence lengths make the allocation pattern less regular, like real data
        length = seq - (step * 37) % (seq // 2)
        x = torch.randint(0, vocab, (batch, length), device=dev)
        y = torch.randint(0, vocab, (batch, length), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model.head(model.encoder(model.embed(x)))
        loss = loss_fn(out.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        loss_value = float(loss.item())
        if nvml:
            used = nvml.used()
            if used is not None:
                peak_used = max(peak_used, used - baseline)
    warm = times[min(10, len(times) - 1):]
    result = {
        "mode": mode,
        "steps": steps,
        "median_step_ms": round(statistics.median(warm) * 1e3, 3),
        "mean_step_ms": round(statistics.mean(warm) * 1e3, 3),
        "peak_reserved_bytes": peak_used if nvml else None,
        "peak_reserved_source": "nvml device used memory above the post-init level"
        if nvml else "unavailable (no libnvidia-ml)",
        "torch_max_memory_reserved": torch.cuda.max_memory_reserved() if mode == "native" else None,
        "final_loss": round(loss_value, 4),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
    }
    print("RESULT " + json.dumps(result), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--modes", default="native,preload,pluggable,api,mempool")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.child:
        child(args.child, args.steps, build)
        return 0
    try:
        import torch
    except ImportError:
        print("torch_check: skipped: PyTorch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("torch_check: skipped: PyTorch sees no CUDA device")
        return 0
    needed = {"preload": "libgpool_preload.so", "pluggable": "libgpool.so", "api": "libgpool.so",
              "mempool": "libgpool.so"}
    results, failed = [], False
    for mode in [m for m in args.modes.split(",") if m]:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
        lib = needed.get(mode)
        if lib and not os.path.exists(os.path.join(build, lib)):
            print(f"torch_check: {mode}: {os.path.join(build, lib)} missing (run make)")
            failed = True
            continue
        if mode == "preload":
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
            env["LD_PRELOAD"] = os.path.join(build, "libgpool_preload.so")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps",
               str(args.steps), "--build", build]
        if mode in ("api", "mempool"):  # checks, not a training run
            cmd = [sys.executable, os.path.join(HERE, "torch_api_check.py"), mode, build]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            print(line[-1] if line else f"torch_check: {mode}: no result\n{proc.stdout}{proc.stderr}",
                  flush=True)
            if proc.returncode != 0 or not line:
                print(f"torch_check: {mode}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}")
                failed = True
            continue
        t0 = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            print(f"torch_check: {mode}: failed (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
            failed = True
            continue
        r = json.loads(line[-1][7:])
        r["wall_s"] = round(time.time() - t0, 1)
        results.append(r)
        print(line[-1], flush=True)
    if results:
        print(f"\n{'mode':<10} {'median ms':>10} {'mean ms':>10} {'peak reserved MiB':>18} "
              f"{'torch reserved MiB':>19} {'loss':>8}")
        for r in results:
            peak = r["peak_reserved_bytes"]
            tr = r["torch_max_memory_reserved"]
            print(f"{r['mode']:<10} {r['median_step_ms']:>10.2f} {r['mean_step_ms']:>10.2f} "
                  f"{(peak / 2**20 if peak is not None else float('nan')):>18.1f} "
                  f"{(tr / 2**20 if tr is not None else float('nan')):>19.1f} "
                  f"{r['final_loss']:>8.3f}")
        print(f"device: {results[0]['device']}, torch {results[0]['torch']}, "
              f"{results[0]['steps']} steps; peak reserved = {results[0]['peak_reserved_source']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
