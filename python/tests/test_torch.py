"""gpool.torch: the pool behind the hooks (on the simulated driver, no PyTorch needed), and
enable() with a CUDA build of PyTorch (skipped, with the reason, where there is none)."""
import ctypes
import os
import subprocess
import sys

import pytest

import gpool
import gpool.torch as gt
from gpool import _lib

MIB = 1 << 20


def _torch_reason():
    """Why the PyTorch tests cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.version.cuda:
        return "this PyTorch (%s) has no CUDA" % torch.__version__
    if os.environ.get("GPOOL_LIBCUDA", "").endswith("sim/libcuda.so.1"):
        return "PyTorch needs the real driver (GPOOL_LIBCUDA is the simulator)"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no GPU)"
    return None


def test_stats_of_the_hooks_pool_on_the_simulator():
    lib = _lib.load()
    assert gt.pool(0) is None or gt.pool(0).stats()["total"]["live_blocks"] == 0
    p = lib.gpool_torch_alloc(5 * MIB, 0, None)
    assert p
    s = gt.stats(0)
    assert s["device"]["live_blocks"] == 1 and s["device"]["requested_bytes"] == 5 * MIB
    snap = gt.pool(0).snapshot()  # gpool_dump_json; gt.snapshot(): PyTorch's format
    assert any(r["addr"] == p for reg in snap["arenas"]["device"] for r in reg["ranges"])
    assert any(b["address"] == p for seg in gt.snapshot(0)["segments"] for b in seg["blocks"])
    borrowed = gt.pool(0)
    borrowed.close()  # borrowed: the hooks' pool stays
    lib.gpool_torch_free(p, 5 * MIB, 0, None)
    s = gt.stats(0)
    assert s["device"]["live_blocks"] == 0 and s["device"]["cached_bytes"] > 0
    gt.empty_cache()
    assert gt.stats(0)["device"]["reserved_bytes"] == 0
    assert gt.pool(63) is None and gt.stats(63)["total"]["allocs"] == 0


def test_enable_without_torch_says_so():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gpool.torch\n"
        "try:\n    gpool.torch.enable()\nexcept RuntimeError as e:\n    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "PyTorch is not installed" in out.stdout, out.stderr


def test_enable_rejects_a_bad_config_before_touching_torch():
    with pytest.raises(gpool.Error) as e:
        gt.enable(no_such_key=1)
    assert e.value.status == gpool.ERR_CONFIG


@pytest.mark.skipif(_torch_reason() is not None, reason=str(_torch_reason()))
def test_enable_serves_torch_tensors():
    # a fresh interpreter: enable() must run before CUDA is initialised
    code = r"""
import torch, gpool.torch
gpool.torch.enable(release_threshold="1G")
x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
s = gpool.torch.stats()
assert s["device"]["live_blocks"] >= 1 and s["device"]["requested_bytes"] >= 8 << 20, s
info = gpool.torch.pool().block_info(x.data_ptr())
assert info["kind"] == "device"
y = (x.float() + 1).sum()
assert int(y.item()) == x.numel()
del x
torch.cuda.synchronize()
try:
    gpool.torch.enable.__globals__["_enabled"] = False
    gpool.torch.enable()
    raise SystemExit("enable after CUDA init did not fail")
except RuntimeError as e:
    assert "already initialised" in str(e), e
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr
