"""gpool as PyTorch's CUDA allocator.

    import gpool.torch
    gpool.torch.enable()        # before the first CUDA tensor; GPOOL_CONF keys as arguments
    x = torch.empty(1 << 20, device="cuda")
    print(gpool.torch.stats()["total"]["in_use_bytes"])

enable() installs libgpool.so's pluggable-allocator hooks (gpool_torch_alloc /
gpool_torch_free, include/gpool_torch.h) through torch.cuda.memory.CUDAPluggableAllocator and
change_current_allocator, and gpool's record-stream, empty-cache and graph-pool functions
through the setters this torch has (hooks(); gpool/_torch_hooks.py). Each device gets one pool,
created on its first allocation; every allocation and free is ordered on the stream PyTorch
passes. snapshot() gives the pools in torch.cuda.memory._snapshot()'s format.
"""

import ctypes
import os

from . import Error, Pool, _args, _check, _lib, _conf_string, make_config, stats_dict
from . import _torch_hooks, _torch_snapshot

__all__ = ["enable", "enabled", "stats", "snapshot", "dump_snapshot", "pool", "empty_cache",
           "batch_stats", "release_graph_memory", "hooks", "mem_pool",
           "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats"]

_enabled = False
_installed = []  # the setters enable() gave gpool's functions (gpool/_torch_hooks.py)


def _torch():
    try:
        import torch  # the real PyTorch (absolute import)
    except ImportError as e:
        raise RuntimeError("gpool.torch: PyTorch is not installed (%s)" % e) from None
    return torch


def enable(device=None, **config):
    """Make gpool PyTorch's CUDA allocator; call it before CUDA is initialised (before the
    first CUDA tensor). ``config``: GPOOL_CONF keys (release_threshold, tcache_bytes, ...),
    added to $GPOOL_CONF for the pools the hooks create. ``device``: make that device current
    afterwards (torch.cuda.set_device). Raises RuntimeError when this PyTorch has no CUDA,
    when CUDA was already initialised or another allocator already used, and gpool.Error for
    a bad configuration. Calling it again once enabled does nothing."""
    global _enabled
    if _enabled:
        return
    make_config(device=None, **config)  # a bad key or value fails here, not at the 1st tensor
    torch = _torch()
    if not getattr(torch.version, "cuda", None):
        raise RuntimeError(
            "gpool.torch: this PyTorch (%s) is built without CUDA; install a CUDA build of "
            "PyTorch" % torch.__version__)
    if not torch.cuda.is_available():
        raise RuntimeError("gpool.torch: torch.cuda.is_available() is False: no GPU or driver")
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "gpool.torch: CUDA is already initialised in this process, so PyTorch's allocator "
            "can no longer be replaced; call gpool.torch.enable() before the first CUDA tensor")
    if config:
        extra = _conf_string(config)
        old = os.environ.get("GPOOL_CONF")
        os.environ["GPOOL_CONF"] = old + "," + extra if old else extra
    path = _lib.library_path()
    alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "gpool_torch_alloc", "gpool_torch_free")
    raw = getattr(alloc, "allocator", None)
    installed = _torch_hooks.install(raw(), _lib.load()) if callable(raw) else []
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError(
            "gpool.torch: PyTorch refused to change its allocator (%s); the allocator was "
            "already used: call gpool.torch.enable() before the first CUDA tensor" % e) from None
    _enabled = True
    _installed[:] = installed
    if device is not None:
        torch.cuda.set_device(device)


def enabled():
    """True once enable() has installed gpool in this process."""
    return _enabled


def hooks():
    """The pluggable-allocator setters of this torch that enable() gave gpool's functions
    (gpool/_torch_hooks.py): "set_record_stream_fn" (Tensor.record_stream reaches gpool),
    "set_reset_fn" (torch.cuda.empty_cache() empties gpool's cache), a begin and an end setter
    and "set_release_pool" (a graph's memory goes back by itself when its pool is released). Empty
    before enable() or on a torch without them (2.0)."""
    return list(_installed)


def mem_pool(use_on_oom=False):
    """A torch.cuda.MemPool whose memory comes from gpool (torch.cuda.MemPool with a
    CUDAPluggableAllocator over gpool_torch_alloc / gpool_torch_free), for
    ``with torch.cuda.use_mem_pool(gpool.torch.mem_pool()):``; PyTorch's caching allocator
    keeps serving the rest. Needs no enable(). Raises RuntimeError when this torch has no
    torch.cuda.MemPool (before 2.5) or no CUDA."""
    torch = _torch()
    cls = getattr(torch.cuda, "MemPool", None) or getattr(torch.cuda.memory, "MemPool", None)
    if cls is None:
        raise RuntimeError("gpool.torch.mem_pool: this PyTorch (%s) has no torch.cuda.MemPool "
                           "(PyTorch 2.5 and later)" % torch.__version__)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(_lib.library_path(), "gpool_torch_alloc",
                                                     "gpool_torch_free")
    _keep.append(alloc)  # the pool refers to the allocator object: keep it alive
    if use_on_oom:
        return cls(alloc.allocator(), use_on_oom=True)
    return cls(alloc.allocator())


_keep = []


def pool(device=0):
    """The gpool.Pool behind the hooks for ``device`` (borrowed: close() leaves it), or None
    when nothing was allocated there yet."""
    lib = _lib.load()
    if not hasattr(lib, "gpool_torch_pool"):
        raise Error(6, "this libgpool.so has no gpool_torch_pool", "gpool_torch_pool")
    device = _args.device(device, "gpool_torch_pool")
    handle = lib.gpool_torch_pool(device)
    return Pool._borrow(handle, int(device)) if handle else None


def batch_stats(device=None):
    """The hooks' free batch on ``device`` (include/gpool_torch.h): blocks PyTorch freed that
    wait for the batch's device synchronize before gpool hands them out again, as a dict
    (blocks, bytes, requested_bytes, limit, frees, flushes, graph_blocks, graph_bytes)."""
    device = _args.device(_current_device() if device is None else device,
                          "gpool_torch_get_batch_stats")
    lib = _lib.load()
    out = _lib.gpool_torch_batch_stats()
    if not hasattr(lib, "gpool_torch_get_batch_stats"):
        return {name: 0 for name, _ in out._fields_}
    _check(lib.gpool_torch_get_batch_stats(device, ctypes.byref(out)),
           "gpool_torch_get_batch_stats")
    return {name: int(getattr(out, name)) for name, _ in out._fields_}


def stats(device=None):
    """The counters of the pool behind PyTorch's allocator, as gpool.Pool.stats() returns
    them: for ``device`` (default: the current one when torch is imported, else 0); an
    empty pool's zeros when nothing was allocated there yet. Blocks PyTorch freed that wait in
    the hooks' free batch, or are held as graph memory, are not counted live or in use
    ("device" and "total"); they are under "free_batch" (batch_stats(): blocks / bytes and
    graph_blocks / graph_bytes). Held graph blocks stay in requested_bytes (gpool keeps their
    rounded sizes only)."""
    if device is None:
        device = _current_device()
    p = pool(device)
    if p is None:
        out = stats_dict(_lib.gpool_stats())
    else:
        out = p.stats()
    b = batch_stats(device)
    for key in ("device", "total"):
        k = out[key]
        k["live_blocks"] = max(0, k["live_blocks"] - b["blocks"] - b["graph_blocks"])
        k["in_use_bytes"] = max(0, k["in_use_bytes"] - b["bytes"] - b["graph_bytes"])
        k["requested_bytes"] = max(0, k["requested_bytes"] - b["requested_bytes"])
        k["frees"] += b["blocks"] + b["graph_blocks"]
    out["free_batch"] = b
    return out


# peaks of the allocated bytes since reset_peak_memory_stats, per device: gpool's own peak
# counters cannot be reset, so the Python side keeps the high-water mark it has seen
_peak_base = {}


def memory_stats(device=None):
    """The pool behind the hooks in torch.cuda.memory_stats()'s key names (a flat dict), which
    raises under a pluggable allocator: ``allocated_bytes.all.current`` / ``.peak`` /
    ``.allocated`` / ``.freed``, ``reserved_bytes.all.*``, ``active_bytes.all.*``,
    ``inactive_split_bytes.all.current``, ``requested_bytes.all.*``, ``allocation.all.*``,
    ``active.all.*``, ``segment.all.current``, ``num_alloc_retries``, ``num_ooms``,
    ``num_sync_all_streams`` (the free batch's synchronizes), ``num_device_alloc`` /
    ``num_device_free`` (cuMemCreate / cuMemRelease calls). The allocated, active and
    requested peaks are those of what PyTorch held through the hooks (gpool_torch_get_peaks:
    the free batch and held graph memory left out, as in the current values), since the pool
    was made or reset_peak_memory_stats(). The reserved peak is gpool's own; after
    reset_peak_memory_stats() it is the highest value memory_stats() calls have seen since
    (gpool's peak counters cannot be reset), a lower bound."""
    if device is None:
        device = _current_device()
    s = stats(device)
    d = s["device"]
    base = _peak_base.get(device)
    cur_alloc, cur_res = d["in_use_bytes"], d["reserved_bytes"]
    if base is None:
        peak_alloc, peak_res, peak_req = (d["peak_in_use_bytes"], d["peak_reserved_bytes"],
                                          d["peak_requested_bytes"])
    else:
        base["allocated"] = max(base["allocated"], cur_alloc)
        base["reserved"] = max(base["reserved"], cur_res)
        base["requested"] = max(base["requested"], d["requested_bytes"])
        peak_alloc, peak_res, peak_req = base["allocated"], base["reserved"], base["requested"]
    hook = _hook_peaks(device)
    if hook is not None:  # exact: counted at each allocation and free of the hooks
        peak_alloc, peak_req = max(hook[0], cur_alloc), max(hook[1], d["requested_bytes"])
    out = {}

    def put(name, current, peak, allocated=None, freed=None):
        # gpool has one pool per memory kind, not PyTorch's large/small split: "all" only
        out[name + ".all.current"] = current
        out[name + ".all.peak"] = peak
        if allocated is not None:
            out[name + ".all.allocated"] = allocated
            out[name + ".all.freed"] = freed

    put("allocated_bytes", cur_alloc, peak_alloc)
    put("active_bytes", cur_alloc, peak_alloc)
    put("requested_bytes", d["requested_bytes"], peak_req)
    put("reserved_bytes", cur_res, peak_res)
    put("inactive_split_bytes", d["cached_bytes"], d["peak_cached_bytes"])
    put("allocation", d["live_blocks"], d["live_blocks"], d["allocs"], d["frees"])
    put("active", d["live_blocks"], d["live_blocks"], d["allocs"], d["frees"])
    out["num_alloc_retries"] = s["oom_retries"]
    out["num_ooms"] = s["ooms"]
    out["num_sync_all_streams"] = s["free_batch"]["flushes"]
    out["num_device_alloc"] = s["driver_calls"].get("cuMemCreate", 0)
    out["num_device_free"] = s["driver_calls"].get("cuMemRelease", 0)
    out["max_split_size"] = -1
    return out


def _hook_peaks(device):
    """(allocated, requested) peaks of what PyTorch held (gpool_torch_get_peaks), or None with
    an older libgpool.so."""
    lib = _lib.load()
    if not hasattr(lib, "gpool_torch_get_peaks"):
        return None
    a, r = ctypes.c_size_t(), ctypes.c_size_t()
    _check(lib.gpool_torch_get_peaks(_args.device(device, "gpool_torch_get_peaks"),
                                     ctypes.byref(a), ctypes.byref(r)), "gpool_torch_get_peaks")
    return a.value, r.value


def memory_allocated(device=None):
    """Bytes in live blocks PyTorch holds (torch.cuda.memory_allocated())."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """Peak of memory_allocated() (torch.cuda.max_memory_allocated())."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes gpool holds from the driver (torch.cuda.memory_reserved())."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    """Peak of memory_reserved() (torch.cuda.max_memory_reserved())."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    """Restart the peaks memory_stats() reports from the current values
    (torch.cuda.reset_peak_memory_stats())."""
    if device is None:
        device = _current_device()
    d = stats(device)["device"]
    _peak_base[device] = {"allocated": d["in_use_bytes"], "reserved": d["reserved_bytes"],
                          "requested": d["requested_bytes"]}
    lib = _lib.load()
    if hasattr(lib, "gpool_torch_reset_peaks"):
        lib.gpool_torch_reset_peaks(_args.device(device, "gpool_torch_reset_peaks"))


def snapshot(device=None):
    """The pool behind the hooks for ``device`` in torch.cuda.memory._snapshot()'s format, which
    raises under a pluggable allocator: {"segments": [...], "device_traces": [[...], ...]}
    (gpool/_torch_snapshot.py says how gpool's ranges map to segments and blocks). Blocks
    PyTorch freed that wait in the free batch or are held as graph memory are
    "active_pending_free". ``device_traces`` has one list per device up to ``device``: gpool's
    trace rows for it (alloc, free_requested, free_completed) when gpool's trace is on
    (GPOOL_CONF trace=FILE or GPOOL_TRACE), else empty lists. Empty segments when nothing was
    allocated there yet. torch.cuda._memory_viz reads it (segments, memory, segsum, trace_plot);
    torch 1.13's reads the segment list alone (snapshot()["segments"])."""
    if device is None:
        device = _current_device()
    p = pool(device)
    out = {"segments": [], "device_traces": [[] for _ in range(int(device) + 1)]}
    if p is None:
        return out
    dump = p.snapshot()
    out["segments"] = _torch_snapshot.from_dump(dump, _freed(device))
    regions = [(r["base"], r["size"]) for r in dump.get("arenas", {}).get("device", [])]
    out["device_traces"][device] = _torch_snapshot.trace_entries(_torch_snapshot.trace_path(),
                                                                 regions)
    return out


def dump_snapshot(path, device=None, legacy=False):
    """Pickle snapshot() to ``path`` (torch.cuda.memory._dump_snapshot's file, for
    ``python -m torch.cuda._memory_viz`` and the memory_viz web page); ``legacy``: the segment
    list alone, the file torch 1.13's _memory_viz reads."""
    import pickle

    snap = snapshot(device)
    with open(path, "wb") as f:
        pickle.dump(snap["segments"] if legacy else snap, f)


def _freed(device):
    """Addresses of the blocks PyTorch freed that gpool holds back (gpool_torch_get_freed)."""
    lib = _lib.load()
    if not hasattr(lib, "gpool_torch_get_freed"):
        return []
    count = ctypes.c_size_t()
    for _ in range(4):  # the batch may grow between the calls
        cap = count.value + 64
        arr = (ctypes.c_void_p * cap)()
        _check(lib.gpool_torch_get_freed(device, arr, cap, ctypes.byref(count)),
               "gpool_torch_get_freed")
        if count.value <= cap:
            return [a for a in arr[:count.value] if a]
    return [a for a in arr if a]


def release_graph_memory():
    """Give the memory of CUDA graphs back to the pool (gpool_torch_release_graph_memory): blocks
    allocated while a stream captured (torch.cuda.graph) or freed inside a capture are held out
    of all reuse, since the graph replays on them; call this once those graphs are destroyed.
    Where enable() installed torch's release-pool setter (torch 2.1+, hooks()) this happens by
    itself when each graph's pool is released (a graph reset or destroyed). Raises gpool.Error when a synchronize
    failed (e.g. during a capture)."""
    _check(_lib.load().gpool_torch_release_graph_memory(), "gpool_torch_release_graph_memory")


def empty_cache():
    """Flush the hooks' free batches, then give every device pool's cached memory back to the
    driver (gpool_torch_empty_cache). torch.cuda.empty_cache() does the same where enable()
    installed torch's reset setter (torch 2.1+, hooks()); on torch 2.0 call this beside it."""
    _lib.load().gpool_torch_empty_cache()


def _current_device():
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


# what the C hooks take, for code that calls them directly (gpool.cupy does)
def _hooks():
    lib = _lib.load()
    return lib.gpool_torch_alloc, lib.gpool_torch_free


