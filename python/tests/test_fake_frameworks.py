"""gpool.torch.enable() and gpool.cupy.allocator against stand-in torch / cupy modules (the
real CUDA builds are absent here): enable() hands PyTorch the library and hook names, passes
its configuration through GPOOL_CONF, and refuses with a clear message when torch has no CUDA,
CUDA is already initialised or the allocator was already used; the CuPy allocator returns
memory from gpool's pool that goes back when CuPy drops it."""
import gc
import os
import subprocess
import sys
import textwrap

import gpool
import gpool.torch as gt

PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(gpool.__file__)))

FAKE_TORCH = """
import sys, types
calls = []
torch = types.ModuleType("torch")
torch.__version__ = "0.0-fake"
torch.version = types.SimpleNamespace(cuda=CUDA)
class Alloc:
    def __init__(self, path, alloc, free):
        calls.append(("pluggable", path, alloc, free))
def change(a):
    if REFUSE:
        raise RuntimeError("Can't swap an already initialized allocator")
    calls.append(("change",))
memory = types.SimpleNamespace(CUDAPluggableAllocator=Alloc, change_current_allocator=change)
torch.cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: INIT,
                                   memory=memory, set_device=lambda d: calls.append(("dev", d)),
                                   current_device=lambda: 0)
sys.modules["torch"] = torch
import gpool, gpool.torch
try:
    gpool.torch.enable(**KW)
    print("OK", calls, gpool.torch.enabled(), __import__("os").environ.get("GPOOL_CONF"))
except RuntimeError as e:
    print("ERR", e)
"""


def run_fake(cuda="12.4", init=False, refuse=False, kw=None, conf=None):
    code = FAKE_TORCH.replace("CUDA", repr(cuda), 1).replace("REFUSE", repr(refuse), 1)
    code = code.replace("INIT", repr(init), 1).replace("KW", repr(kw or {}), 1)
    env = dict(os.environ, PYTHONPATH=PYDIR)
    env.pop("GPOOL_CONF", None)
    if conf:
        env["GPOOL_CONF"] = conf
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_enable_installs_the_hooks_with_the_config():
    out = run_fake(kw={"release_threshold": "1G", "device": 1}, conf="small_max=8K")
    lib = gpool.library_path()
    assert out.startswith("OK")
    assert "('pluggable', %r, 'gpool_torch_alloc', 'gpool_torch_free')" % lib in out
    assert "('change',)" in out and "('dev', 1)" in out
    assert out.endswith("True small_max=8K,release_threshold=1G")


def test_enable_without_cuda_build():
    assert run_fake(cuda=None) == ("ERR gpool.torch: this PyTorch (0.0-fake) is built without "
                                   "CUDA; install a CUDA build of PyTorch")


def test_enable_after_cuda_init():
    out = run_fake(init=True)
    assert out.startswith("ERR") and "already initialised" in out and "before the first" in out


def test_enable_when_the_allocator_was_used():
    out = run_fake(refuse=True)
    assert out.startswith("ERR") and "refused to change its allocator" in out
    assert "already initialized allocator" in out


class _FakeCupy:
    """The parts of cupy that gpool.cupy.allocator uses."""

    def __init__(self):
        import types

        class UnownedMemory:
            def __init__(self, ptr, size, owner, device_id):
                self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

        class MemoryPointer:
            def __init__(self, mem, offset):
                self.mem, self.ptr = mem, mem.ptr + offset

        class OutOfMemoryError(Exception):
            def __init__(self, size, total, limit):
                super().__init__("oom %d" % size)

        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDevice=lambda: 0),
            get_current_stream=lambda: types.SimpleNamespace(ptr=0),
            memory=types.SimpleNamespace(UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
                                         OutOfMemoryError=OutOfMemoryError))


def test_cupy_allocator_with_a_stand_in_cupy(monkeypatch):
    import gpool.cupy

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy())
    before = gt.stats(0)["device"]["live_blocks"]
    mp = gpool.cupy.allocator(3 << 20)
    assert mp.ptr and gt.pool(0).block_info(mp.ptr)["requested_size"] == 3 << 20
    assert gt.stats(0)["device"]["live_blocks"] == before + 1
    zero = gpool.cupy.allocator(0)
    assert zero.ptr == 0
    del mp
    gc.collect()
    assert gt.stats(0)["device"]["live_blocks"] == before
    try:
        gpool.cupy.allocator(1 << 50)  # more than any device: gpool refuses
        raise AssertionError("no error")
    except Exception as e:
        assert type(e).__name__ == "OutOfMemoryError", e
