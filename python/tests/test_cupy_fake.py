"""gpool.cupy against a stand-in `cupy` module that mimics the API CuPy documents for custom
allocators (cupy.cuda.set_allocator / set_pinned_memory_allocator: a callable taking a size and
returning a MemoryPointer(UnownedMemory(ptr, size, owner, device_id), 0) or a
PinnedMemoryPointer(mem, 0) whose mem has ptr and size; get_current_stream().ptr), on the
simulated driver: device blocks follow CuPy's current stream at allocation time and their free
goes through the hooks' batch (stream-safe as the PyTorch hooks are); pinned blocks come from
gpool; without CuPy both say so."""
import ctypes
import gc
import os
import subprocess
import sys
import types

import gpool
import gpool.cupy
import gpool.torch as gt

MIB = 1 << 20


def _sim_stream():
    """A non-blocking stream made on the simulated driver (CuPy's cupy.cuda.Stream())."""
    cu = ctypes.CDLL(os.environ["GPOOL_LIBCUDA"])
    assert cu.cuInit(0) == 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    s = ctypes.c_void_p()
    assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0  # CU_STREAM_NON_BLOCKING
    return s.value


def fake_cupy(stream_ptr=0):
    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id=None):
            self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr = mem, mem.ptr + offset

    class PinnedMemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr = mem, mem.ptr + offset

        def size(self):
            return self.mem.size - (self.ptr - self.mem.ptr)

    class OutOfMemoryError(Exception):
        def __init__(self, size, total, limit):
            super().__init__("out of memory allocating %d" % size)

    current = types.SimpleNamespace(ptr=stream_ptr)
    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0),
        get_current_stream=lambda: current,
        memory=types.SimpleNamespace(UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
                                     OutOfMemoryError=OutOfMemoryError),
        pinned_memory=types.SimpleNamespace(PinnedMemoryPointer=PinnedMemoryPointer))
    mod = types.ModuleType("cupy")
    mod.cuda = cuda
    return mod, current


def test_device_blocks_follow_cupys_current_stream(monkeypatch):
    s = _sim_stream()
    mod, current = fake_cupy(s)
    monkeypatch.setitem(sys.modules, "cupy", mod)
    a = gpool.cupy.allocator(2 * MIB)
    assert gt.pool(0).block_info(a.ptr)["stream"] == s
    current.ptr = 0  # `with cupy.cuda.Stream.null:`
    b = gpool.cupy.allocator(2 * MIB)
    assert gt.pool(0).block_info(b.ptr)["stream"] == 0
    assert a.mem.owner.stream == s and a.mem.device_id == 0
    frees = gt.batch_stats(0)["frees"]
    ptr = a.ptr
    del a
    gc.collect()
    # freed through the hooks' batch: not handed out again before the batch's synchronize
    assert gt.batch_stats(0)["frees"] == frees + 1
    assert ptr in gt._freed(0)
    del b
    gc.collect()
    gt.empty_cache()
    assert gt._freed(0) == []


def test_pinned_blocks_come_from_gpool(monkeypatch):
    mod, _ = fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", mod)
    p = gpool.cupy.pinned_allocator(3 * MIB)
    assert p.ptr and p.size() == 3 * MIB
    pool = gpool.cupy._pinned()
    info = pool.block_info(p.ptr)
    assert info["kind"] == "pinned" and info["requested_size"] == 3 * MIB
    ctypes.memset(p.ptr, 7, 3 * MIB)  # host memory, writable
    live = pool.stats()["total"]["live_blocks"]
    del p
    gc.collect()
    assert pool.stats()["total"]["live_blocks"] == live - 1
    z = gpool.cupy.pinned_allocator(0)
    assert z.ptr == 0


def test_without_cupy_both_allocators_say_so():
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import gpool.cupy\n"
            "for f in (gpool.cupy.allocator, gpool.cupy.pinned_allocator):\n"
            "    try:\n        f(1024)\n    except RuntimeError as e:\n        print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all("CuPy is not installed" in l for l in lines), out
    assert "ModuleNotFoundError" not in out.stderr
