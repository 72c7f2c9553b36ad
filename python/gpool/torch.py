"""gpool as PyTorch's CUDA allocator.

    import gpool.torch
    gpool.torch.enable()        # before the first CUDA tensor; GPOOL_CONF keys as arguments
    x = torch.empty(1 << 20, device="cuda")
    print(gpool.torch.stats()["total"]["in_use_bytes"])

enable() installs libgpool.so's pluggable-allocator hooks (gpool_torch_alloc /
gpool_torch_free, include/gpool_torch.h) through torch.cuda.memory.CUDAPluggableAllocator and
change_current_allocator. Each device gets one pool, created on its first allocation; every
allocation and free is ordered on the stream PyTorch passes.
"""

import os

from . import Error, Pool, _lib, _conf_string, make_config, stats_dict

__all__ = ["enable", "enabled", "stats", "snapshot", "pool", "empty_cache"]

_enabled = False


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
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError(
            "gpool.torch: PyTorch refused to change its allocator (%s); the allocator was "
            "already used: call gpool.torch.enable() before the first CUDA tensor" % e) from None
    _enabled = True
    if device is not None:
        torch.cuda.set_device(device)


def enabled():
    """True once enable() has installed gpool in this process."""
    return _enabled


def pool(device=0):
    """The gpool.Pool behind the hooks for ``device`` (borrowed: close() leaves it), or None
    when nothing was allocated there yet."""
    lib = _lib.load()
    if not hasattr(lib, "gpool_torch_pool"):
        raise Error(6, "this libgpool.so has no gpool_torch_pool", "gpool_torch_pool")
    handle = lib.gpool_torch_pool(int(device))
    return Pool._borrow(handle, int(device)) if handle else None


def stats(device=None):
    """The counters of the pool behind PyTorch's allocator, as gpool.Pool.stats() returns
    them: for ``device`` (default: the current one when torch is imported, else 0); an
    empty pool's zeros when nothing was allocated there yet."""
    if device is None:
        device = _current_device()
    p = pool(device)
    if p is None:
        return stats_dict(_lib.gpool_stats())
    return p.stats()


def snapshot(device=None):
    """gpool_dump_json of the pool behind PyTorch's allocator, as a dict (None when nothing
    was allocated on that device yet)."""
    p = pool(_current_device() if device is None else device)
    return None if p is None else p.snapshot()


def empty_cache():
    """Give every device pool's cached memory back to the driver (gpool_torch_empty_cache)."""
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


