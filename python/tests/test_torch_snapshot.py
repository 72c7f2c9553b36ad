"""gpool.torch.snapshot() in PyTorch's _snapshot() format (simulated driver): the 2.x schema that
torch/cuda/memory.py documents (key names, types, blocks tiling their segment, the sizes the
2.x readers add up), torch 1.13's torch/cuda/_memory_viz.py reading the segment list (its
segments / memory / stats functions and its command line, where python3-torch is installed),
and device_traces from gpool's trace."""
import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import gpool
import gpool.torch as gt
from gpool import _lib

MIB = 1 << 20
SEGMENT_KEYS = {"device": int, "address": int, "total_size": int, "allocated_size": int,
                "active_size": int, "requested_size": int, "stream": int, "segment_type": str,
                "segment_pool_id": tuple, "is_expandable": bool, "frames": list, "blocks": list}
BLOCK_KEYS = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def _memory_viz_1_13():
    """torch 1.13's torch/cuda/_memory_viz.py, loaded from its file (it needs no torch), or None."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "cuda", "_memory_viz.py")
    if not os.path.exists(path):
        return None
    m_spec = importlib.util.spec_from_file_location("_memory_viz_under_test", path)
    mod = importlib.util.module_from_spec(m_spec)
    m_spec.loader.exec_module(mod)
    return mod


def _workload():
    """Large and small blocks, one freed into the hooks' batch; returns (live, freed) pointers."""
    lib = _lib.load()
    live = [lib.gpool_torch_alloc(n, 0, None) for n in (5 * MIB, 40 * MIB, 1000, 5000)]
    freed = lib.gpool_torch_alloc(3 * MIB, 0, None)
    assert all(live) and freed
    lib.gpool_torch_free(freed, 3 * MIB, 0, None)
    return live, freed


def _cleanup(live):
    lib = _lib.load()
    for p in live:
        lib.gpool_torch_free(p, 0, 0, None)
    gt.empty_cache()


def check_schema(snap):
    """What torch/cuda/memory.py documents for _snapshot() and the 2.x readers rely on."""
    assert set(snap) >= {"segments", "device_traces"}
    assert isinstance(snap["device_traces"], list)
    for seg in snap["segments"]:
        for key, typ in SEGMENT_KEYS.items():
            assert isinstance(seg[key], typ), (key, seg[key])
        assert seg["segment_type"] in ("small", "large")
        assert seg["blocks"], seg
        addr = seg["address"]
        for b in seg["blocks"]:
            for key, typ in BLOCK_KEYS.items():
                assert isinstance(b[key], typ), (key, b)
            assert b["state"] in STATES, b
            assert b["address"] == addr, "blocks must tile the segment in address order"
            assert 0 <= b["requested_size"] <= b["size"]
            addr += b["size"]
        sizes = {s: sum(b["size"] for b in seg["blocks"] if b["state"] == s) for s in STATES}
        assert seg["total_size"] == addr - seg["address"] == sum(sizes.values())
        assert seg["allocated_size"] == sizes["active_allocated"]
        assert seg["active_size"] == sizes["active_allocated"] + sizes["active_pending_free"]
        # segsum: allocated (requested) + internal + external free == total
        internal = sum(b["size"] - b["requested_size"] for b in seg["blocks"]
                       if b["state"] == "active_allocated")
        external = sizes["inactive"] + sizes["active_pending_free"]
        assert seg["requested_size"] + internal + external == seg["total_size"]


def test_snapshot_has_pytorchs_schema():
    live, freed = _workload()
    try:
        snap = gt.snapshot(0)
        check_schema(snap)
        blocks = {b["address"]: b for seg in snap["segments"] for b in seg["blocks"]}
        for p in live[:2]:
            assert blocks[p]["state"] == "active_allocated"
        assert blocks[live[0]]["requested_size"] == 5 * MIB
        assert blocks[freed]["state"] == "active_pending_free", "a batched free is not live"
        assert any(s["segment_type"] == "small" for s in snap["segments"])
        reserved = gt.stats(0)["device"]["reserved_bytes"]
        assert sum(s["total_size"] for s in snap["segments"]) == reserved
        allocated = sum(s["allocated_size"] for s in snap["segments"])
        assert allocated >= 45 * MIB
        assert pickle.loads(pickle.dumps(snap)) == snap
        assert snap["device_traces"] == [[]]  # gpool's trace is off
    finally:
        _cleanup(live)


def test_snapshot_of_an_unused_device_is_empty():
    assert gt.snapshot(5) == {"segments": [], "device_traces": [[]] * 6}


@pytest.mark.skipif(_memory_viz_1_13() is None, reason="no torch/cuda/_memory_viz.py (python3-torch)")
def test_torch_memory_viz_reads_the_segments(tmp_path):
    viz = _memory_viz_1_13()
    live, freed = _workload()
    try:
        snap = gt.snapshot(0)
        segs = snap["segments"]
        lines = viz.segments(segs, format_flamegraph=lambda text: text).splitlines()
        assert any(l.endswith(" %d" % (40 * MIB)) and "active_allocated" in l for l in lines)
        assert any("active_pending_free" in l for l in lines)
        mem = viz.memory(segs, format_flamegraph=lambda text: text)
        assert sum(int(l.rsplit(" ", 1)[1]) for l in mem.splitlines()) == sum(
            s["total_size"] for s in segs)
        st = viz.stats(segs)  # asserts each segment's total_size is its blocks' sum
        assert st["segments"] == len(segs)
        assert st["total_size"].value == sum(s["total_size"] for s in segs)
        assert st["active_allocated"].value == sum(s["allocated_size"] for s in segs)
        # its command line on the pickle gpool writes for it
        path = tmp_path / "snap.pickle"
        gt.dump_snapshot(str(path), 0, legacy=True)
        out = subprocess.run([sys.executable, viz.__file__, "stats", str(path)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "'segments': %d" % len(segs) in out.stdout and "active_allocated" in out.stdout
    finally:
        _cleanup(live)


def test_device_traces_when_gpools_trace_is_on(tmp_path):
    trace = tmp_path / "trace.csv"
    code = textwrap.dedent("""
        import gpool.torch as gt
        from gpool import _lib
        lib = _lib.load()
        a = lib.gpool_torch_alloc(4 << 20, 0, None)
        b = lib.gpool_torch_alloc(6 << 20, 0, None)
        lib.gpool_torch_free(a, 4 << 20, 0, None)
        gt.empty_cache()  # the batch flushes: a's free reaches the pool (and the trace)
        snap = gt.snapshot(0)
        t = snap["device_traces"][0]
        acts = [(e["action"], e["addr"]) for e in t]
        assert ("alloc", a) in acts and ("alloc", b) in acts, acts
        assert ("free_requested", a) in acts and ("free_completed", a) in acts, acts
        assert all(set(e) >= {"action", "addr", "size", "stream", "frames", "time_us"} for e in t)
        assert [e["size"] for e in t if e["addr"] == a] == [4 << 20] * 3
        print("ok", len(t))
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)),
               GPOOL_CONF="trace=%s" % trace)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr


def test_gpool_snapshot_goes_through_the_importer(tmp_path):
    """gpool.torch.dump_snapshot() is a file `gpool-bench import` reads (tools/snapshot_import.py):
    the trace's rows plus, at time 0, what was live before it; the replay's peak is the pool's."""
    trace, snap = tmp_path / "trace.csv", tmp_path / "snap.pickle"
    code = textwrap.dedent("""
        import sys
        import gpool.torch as gt
        from gpool import _lib
        lib = _lib.load()
        big = lib.gpool_torch_alloc(600 << 20, 0, None)       # live throughout
        tmp = lib.gpool_torch_alloc(16 << 20, 0, None)
        lib.gpool_torch_free(tmp, 16 << 20, 0, None)
        gt.empty_cache()
        small = lib.gpool_torch_alloc(8 << 20, 0, None)        # live at the snapshot
        gt.dump_snapshot(sys.argv[1], 0)
        print(gt.stats(0)["device"]["peak_in_use_bytes"])
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)),
               GPOOL_CONF="trace=%s" % trace)
    out = subprocess.run([sys.executable, "-c", code, str(snap)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    peak_in_pool = int(out.stdout.split()[-1])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(gpool.__file__)), "..",
                                    "tools"))
    import snapshot_import

    csv_path = tmp_path / "replay.csv"
    snapshot_import.convert(str(snap), str(csv_path), quiet=True)
    live = peak = 0
    allocs = 0
    with open(csv_path) as f:
        next(f)
        for line in f:
            _, _, action, _, size, _ = line.strip().split(",")
            allocs += action == "allocate"
            live += int(size) if action == "allocate" else -int(size)
            peak = max(peak, live)
    assert allocs == 3
    assert peak == 616 << 20 and peak <= peak_in_pool
