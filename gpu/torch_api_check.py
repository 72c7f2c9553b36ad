"""torch_api_check.py - gpool.torch's hooks under a real CUDA PyTorch (run by gpu/torch_check.py
in a child process of its own, modes "api" and "mempool"; one `RESULT {json}` line each).

api: gpool.torch.enable(), then alloc/free under the allocator, a tensor used on a side stream
     (record_stream) and freed while that stream still works on it, torch.cuda.graph capture +
     replay with eager work in between, memory_stats(), snapshot() (and torch.cuda._memory_viz
     on it where this torch has segsum/trace), torch.cuda.empty_cache() reaching gpool where the
     reset hook was installed, graph memory released when the graph goes where the release-pool
     hook was installed.
mempool: torch.cuda.MemPool over gpool's allocator (gpool.torch.mem_pool()) with
     torch.cuda.use_mem_pool, where this torch has it; PyTorch's own allocator serves the rest.
"""
import gc
import json
import os
import sys


def _setup(build):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))
    os.environ.setdefault("GPOOL_LIBRARY", os.path.join(build, "libgpool.so"))
    import torch
    import gpool.torch as gt
    return torch, gt


def _check(results, name, fn):
    try:
        out = fn()
        results[name] = "skip: " + out[5:] if isinstance(out, str) and out.startswith("skip:") \
            else "ok"
    except Exception as e:  # report every check, not only the first failure
        results[name] = "FAIL: %s: %s" % (type(e).__name__, e)


def api(build):
    torch, gt = _setup(build)
    gt.enable()
    dev = torch.device("cuda", 0)
    n = 16 << 20
    res = {"hooks": gt.hooks(), "torch": torch.__version__}

    def alloc_free():
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        info = gt.pool(0).block_info(x.data_ptr())
        assert info["kind"] == "device" and info["requested_size"] >= n, info
        x.fill_(3)
        assert int(x.sum().item()) == 3 * n
        del x

    def record_stream():
        side = torch.cuda.Stream()
        x = torch.ones(n // 4, device=dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # side is still busy when x is freed
            y = x * 2
        x.record_stream(side)
        del x
        for _ in range(8):  # eager work on the current stream reuses freed memory at once
            z = torch.zeros(n // 4, device=dev)
            del z
        side.synchronize()
        assert float(y.sum().item()) == 2.0 * (n // 4), "the side stream read overwritten data"

    def graph():
        static_in = torch.ones(n // 4, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as the CUDA graphs docs do
            for _ in range(3):
                tmp = static_in * 3
                out = tmp + 1
                del tmp, out
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            tmp = static_in * 3  # freed inside the capture
            out = tmp + 1
            del tmp
        eager = [torch.full((n // 4,), 7.0, device=dev) for _ in range(4)]
        for _ in range(3):
            static_in.fill_(2.0)
            g.replay()
        torch.cuda.synchronize()
        assert float(out.sum().item()) == 7.0 * (n // 4), "replay result"
        for e in eager:
            assert float(e.sum().item()) == 7.0 * (n // 4), "a replay overwrote an eager tensor"
        held = gt.batch_stats(0)["graph_blocks"]
        assert held >= 1, "graph memory is not held"
        del g, out
        gc.collect()
        after = gt.batch_stats(0)["graph_blocks"]
        if "set_release_pool" in gt.hooks():
            assert after == 0, "graph memory not released when the graph went (%d held)" % after
        else:
            gt.release_graph_memory()
            assert gt.batch_stats(0)["graph_blocks"] == 0

    def stats():
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        m = gt.memory_stats()
        assert m["allocated_bytes.all.current"] >= n, m
        assert gt.max_memory_allocated() >= n and gt.memory_reserved() >= n
        del x

    def snapshot():
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        snap = gt.snapshot()
        blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"]}
        assert blocks[x.data_ptr()]["state"] == "active_allocated"
        for seg in snap["segments"]:
            assert seg["total_size"] == sum(b["size"] for b in seg["blocks"])
        viz = getattr(torch.cuda, "_memory_viz", None)
        if viz is None:
            import torch.cuda._memory_viz as viz
        if hasattr(viz, "segsum"):
            assert "total_reserved" in viz.segsum(snap)
            viz.trace(snap)
        else:
            viz.stats(snap["segments"])
        del x

    def empty_cache():
        if "set_reset_fn" not in gt.hooks():
            return "skip: this torch has no set_reset_fn"
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        del x
        torch.cuda.empty_cache()  # reaches gpool through the reset hook
        assert gt.batch_stats(0)["blocks"] == 0, "the free batch was not flushed"

    for name, fn in (("alloc_free", alloc_free), ("record_stream", record_stream),
                     ("graph", graph), ("memory_stats", stats), ("snapshot", snapshot),
                     ("empty_cache", empty_cache)):
        _check(res, name, fn)
    return res


def mempool(build):
    torch, gt = _setup(build)
    res = {"torch": torch.__version__}
    if not (hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")):
        res["mempool"] = "skip: this torch has no torch.cuda.MemPool / use_mem_pool"
        return res

    def run():
        dev = torch.device("cuda", 0)
        pool = gt.mem_pool()
        before = gt.stats(0)["device"]["allocs"]
        with torch.cuda.use_mem_pool(pool):
            x = torch.ones(8 << 20, device=dev)
        y = torch.ones(8 << 20, device=dev)  # PyTorch's own allocator
        assert gt.stats(0)["device"]["allocs"] > before, "the pool did not use gpool"
        assert gt.pool(0).block_info(x.data_ptr())["kind"] == "device"
        assert float((x + y).sum().item()) == 2.0 * (8 << 20)
        del x, y

    _check(res, "mempool", run)
    return res


def main(mode, build):
    res = {"mode": mode}
    res.update(api(build) if mode == "api" else mempool(build))
    print("RESULT " + json.dumps(res), flush=True)
    failed = [k for k, v in res.items() if isinstance(v, str) and v.startswith("FAIL")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
