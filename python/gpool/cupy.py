"""gpool as CuPy's allocator.

    import cupy, gpool.cupy
    cupy.cuda.set_allocator(gpool.cupy.allocator)
    cupy.cuda.set_pinned_memory_allocator(gpool.cupy.pinned_allocator)

Blocks come from the same per-device pools as gpool.torch (libgpool.so's gpool_torch_alloc /
gpool_torch_free), ordered on CuPy's current stream; a block is freed on that stream when
CuPy drops its last reference. gpool.torch.stats(device) reads the pool behind it.
"""

import ctypes

from . import _args, _lib

__all__ = ["allocator", "pinned_allocator"]


class _Block:
    """Owner of one gpool block: frees it when CuPy lets the memory go."""

    __slots__ = ("ptr", "size", "device", "stream", "__weakref__")

    def __init__(self, ptr, size, device, stream):
        self.ptr, self.size, self.device, self.stream = ptr, size, device, stream

    def __del__(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, None
            _lib.load().gpool_torch_free(ptr, self.size, self.device, self.stream)


def _alloc_block(size, device, stream):
    """A _Block of ``size`` bytes on ``device``, ordered on ``stream`` (an int handle); None
    when gpool has no memory for it (gpool_last_error() says why)."""
    lib = _lib.load()
    ptr = lib.gpool_torch_alloc(size, device, ctypes.c_void_p(stream or None))
    return _Block(ptr, size, device, stream or None) if ptr else None


def _cupy():
    try:
        import cupy  # the real CuPy (absolute import)
    except ImportError as e:
        raise RuntimeError("gpool.cupy: CuPy is not installed (%s); install a CUDA build of "
                           "CuPy (pip install cupy-cuda12x)" % e) from None
    return cupy


def allocator(size):
    """A CuPy allocator (cupy.cuda.set_allocator(gpool.cupy.allocator)): returns a
    cupy.cuda.MemoryPointer; raises cupy's OutOfMemoryError when gpool has no memory,
    RuntimeError when CuPy is not installed, gpool.Error for a bad size."""
    cupy = _cupy()
    size = _args.size(size, "gpool.cupy.allocator")

    device = cupy.cuda.runtime.getDevice()
    if size == 0:
        return cupy.cuda.memory.MemoryPointer(cupy.cuda.memory.UnownedMemory(0, 0, None, device), 0)
    stream = cupy.cuda.get_current_stream().ptr
    block = _alloc_block(size, device, stream)
    if block is None:
        msg = _lib.load().gpool_last_error().decode(errors="replace")
        try:
            err = cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
        except Exception:
            err = MemoryError("gpool: out of memory allocating %d bytes: %s" % (size, msg))
        raise err
    mem = cupy.cuda.memory.UnownedMemory(block.ptr, size, block, device)
    return cupy.cuda.memory.MemoryPointer(mem, 0)


class _PinnedMemory:
    """Pinned host memory from gpool, as cupy.cuda.PinnedMemoryPointer reads it (ptr, size);
    the block goes back to gpool's pool when CuPy drops its last reference."""

    __slots__ = ("ptr", "size", "_pool", "__weakref__")

    def __init__(self, pool, ptr, size):
        self._pool, self.ptr, self.size = pool, ptr, size

    def __del__(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            try:
                self._pool.free(ptr)  # reused once the work queued so far is done
            except Exception:
                pass


_pinned_pool = None


def _pinned():
    global _pinned_pool
    if _pinned_pool is None:
        from . import Pool

        _pinned_pool = Pool()
    return _pinned_pool


def pinned_allocator(size):
    """A CuPy pinned-memory allocator (cupy.cuda.set_pinned_memory_allocator(
    gpool.cupy.pinned_allocator)): page-locked host memory from one gpool pool of this
    process (GPOOL_CONF applies); returns a cupy.cuda.PinnedMemoryPointer. Raises
    RuntimeError without CuPy, gpool.Error for a bad size or no memory."""
    cupy = _cupy()
    size = _args.size(size, "gpool.cupy.pinned_allocator")
    pm = cupy.cuda.pinned_memory
    if size == 0:
        return pm.PinnedMemoryPointer(_PinnedMemory(None, 0, 0), 0)
    pool = _pinned()
    ptr = pool.alloc(size, kind="pinned")
    return pm.PinnedMemoryPointer(_PinnedMemory(pool, ptr, size), 0)
