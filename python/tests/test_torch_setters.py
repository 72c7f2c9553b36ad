"""gpool.torch uses each pluggable-allocator setter the installed torch has (torch 1.13 here, so
stand-in allocator objects mimic the setters of torch 2.0, 2.1/2.2 and 2.3+ as
torch/csrc/cuda/Module.cpp binds them): which are installed, that each gets the address of
gpool's C function, and that calling those addresses as torch does drives the hooks (a graph
pool begun then released gives the graph memory back). mem_pool() against a stand-in
torch.cuda.MemPool."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import gpool
import gpool.torch as gt
from gpool import _lib, _torch_hooks

V2_1 = ("set_init_fn", "set_reset_fn", "set_memory_fraction_fn", "set_base_alloc_fn",
        "set_record_stream_fn", "set_begin_allocate_stream_to_pool",
        "set_end_allocate_stream_to_pool_fn", "set_release_pool")
V2_3 = ("set_init_fn", "set_reset_fn", "set_memory_fraction_fn", "set_base_alloc_fn",
        "set_record_stream_fn", "set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn",
        "set_release_pool")


class FakeRaw:
    """A torch._C._CUDAPluggableAllocator with the given setters; records what each got."""

    def __init__(self, names):
        self.got = {}
        for name in names:
            setattr(self, name, lambda addr, _n=name: self.got.__setitem__(_n, addr))


def address(symbol):
    return ctypes.cast(getattr(_lib.load(), symbol), ctypes.c_void_p).value


def test_torch_2_0_has_no_setters():
    raw = FakeRaw(())
    assert _torch_hooks.install(raw, _lib.load()) == [] and raw.got == {}


def test_torch_2_1_setters():
    raw = FakeRaw(V2_1)
    got = _torch_hooks.install(raw, _lib.load())
    assert got == ["set_record_stream_fn", "set_reset_fn", "set_begin_allocate_stream_to_pool",
                   "set_end_allocate_stream_to_pool_fn", "set_release_pool"]
    assert raw.got["set_begin_allocate_stream_to_pool"] == address(
        "gpool_torch_begin_allocate_stream_to_pool")
    assert raw.got["set_reset_fn"] == address("gpool_torch_empty_cache")


def test_torch_2_3_setters():
    raw = FakeRaw(V2_3)
    got = _torch_hooks.install(raw, _lib.load())
    assert got == ["set_record_stream_fn", "set_reset_fn", "set_begin_allocate_to_pool",
                   "set_end_allocate_to_pool_fn", "set_release_pool"]
    for name, symbol in _torch_hooks.SETTERS:
        if name in got:
            assert raw.got[name] == address(symbol), name
    assert "set_end_allocate_stream_to_pool_fn" not in raw.got


def test_release_without_begin_is_not_installed():
    raw = FakeRaw(("set_release_pool", "set_record_stream_fn"))
    assert _torch_hooks.install(raw, _lib.load()) == ["set_record_stream_fn"]


def test_the_addresses_drive_the_hooks_as_torch_calls_them():
    """torch calls begin(device, MempoolId_t, filter) at capture_begin and release(device, id)
    at CUDAGraph::reset: through the addresses the setters got, with PyTorch's argument types."""
    raw = FakeRaw(V2_3)
    _torch_hooks.install(raw, _lib.load())
    mid = _lib.gpool_torch_mempool_id
    begin = ctypes.CFUNCTYPE(None, ctypes.c_int, mid, ctypes.c_void_p)(
        raw.got["set_begin_allocate_to_pool"])
    release = ctypes.CFUNCTYPE(None, ctypes.c_int, mid)(raw.got["set_release_pool"])
    lib = _lib.load()
    base = lib.gpool_torch_live_pools()
    begin(0, mid(3, 0), None)
    begin(0, mid(3, 0), None)  # two graphs sharing a pool
    assert lib.gpool_torch_live_pools() == base + 2
    release(0, mid(3, 0))
    release(0, mid(3, 0))
    assert lib.gpool_torch_live_pools() == base
    empty = ctypes.CFUNCTYPE(None)(raw.got["set_reset_fn"])
    p = lib.gpool_torch_alloc(4 << 20, 0, None)
    lib.gpool_torch_free(p, 4 << 20, 0, None)
    assert gt.batch_stats(0)["blocks"] >= 1
    empty()  # torch.cuda.empty_cache() under the pluggable allocator
    assert gt.batch_stats(0)["blocks"] == 0


FAKE = """
import sys, types
calls = []
torch = types.ModuleType("torch")
torch.__version__ = "2.3-fake"
torch.version = types.SimpleNamespace(cuda="12.1")
class Raw:
    def __init__(self):
        for n in SETTERS:
            setattr(self, n, lambda a, _n=n: calls.append(_n))
class Alloc:
    def __init__(self, path, alloc, free):
        self._raw = Raw()
    def allocator(self):
        return self._raw
memory = types.SimpleNamespace(CUDAPluggableAllocator=Alloc, change_current_allocator=lambda a: None)
cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False,
                             memory=memory, current_device=lambda: 0)
if MEMPOOL:
    class MemPool:
        def __init__(self, allocator=None, use_on_oom=False):
            self.allocator = allocator
            calls.append(("mempool", type(allocator).__name__, use_on_oom))
    cuda.MemPool = MemPool
torch.cuda = cuda
sys.modules["torch"] = torch
import gpool.torch
try:
    MAIN
except RuntimeError as e:
    print("ERR", e)
"""


def run_fake(main, setters=V2_3, mempool=False):
    code = FAKE.replace("SETTERS", repr(setters)).replace("MEMPOOL", repr(mempool))
    code = code.replace("MAIN", main)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_enable_installs_what_this_torch_has():
    out = run_fake("gpool.torch.enable(); print('OK', gpool.torch.hooks(), calls)")
    assert out.startswith("OK ['set_record_stream_fn', 'set_reset_fn', "
                          "'set_begin_allocate_to_pool', 'set_end_allocate_to_pool_fn', "
                          "'set_release_pool']"), out


def test_enable_on_torch_2_0_installs_none():
    out = run_fake("gpool.torch.enable(); print('OK', gpool.torch.hooks())", setters=())
    assert out == "OK []"


def test_mem_pool_needs_torch_cuda_mempool():
    out = run_fake("gpool.torch.mem_pool()")
    assert out.startswith("ERR") and "no torch.cuda.MemPool" in out and "2.3-fake" in out


def test_mem_pool_with_gpools_allocator():
    out = run_fake("p = gpool.torch.mem_pool(); q = gpool.torch.mem_pool(use_on_oom=True); "
                   "print('OK', calls)", mempool=True)
    assert out == "OK [('mempool', 'Raw', False), ('mempool', 'Raw', True)]", out
