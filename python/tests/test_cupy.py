"""gpool.cupy.allocator: with a CUDA build of CuPy (skipped, with the reason, where there is
none), and its block ownership on the simulated driver (no CuPy needed)."""
import gc
import os

import pytest

import gpool.cupy as gc_cupy
import gpool.torch as gt

MIB = 1 << 20


def _cupy_reason():
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    if os.environ.get("GPOOL_LIBCUDA", "").endswith("sim/libcuda.so.1"):
        return "CuPy needs the real driver (GPOOL_LIBCUDA is the simulator)"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:  # cupy without a usable CUDA runtime
        return "CuPy has no usable CUDA: %s" % e
    return None


def test_block_is_freed_when_its_owner_goes():
    before = gt.stats(0)["device"]["live_blocks"]
    block = gc_cupy._alloc_block(3 * MIB, 0, 0)
    assert block is not None and block.ptr
    assert gt.pool(0).block_info(block.ptr)["requested_size"] == 3 * MIB
    assert gt.stats(0)["device"]["live_blocks"] == before + 1
    del block
    gc.collect()
    assert gt.stats(0)["device"]["live_blocks"] == before


@pytest.mark.skipif(_cupy_reason() is not None, reason=str(_cupy_reason()))
def test_cupy_arrays_come_from_gpool():
    import cupy

    cupy.cuda.set_allocator(gc_cupy.allocator)
    try:
        dev = cupy.cuda.runtime.getDevice()
        before = gt.stats(dev)["device"]["allocs"]
        a = cupy.arange(1 << 20, dtype=cupy.float32)
        assert float(a.sum()) == float((1 << 20) * ((1 << 20) - 1) / 2)
        assert gt.stats(dev)["device"]["allocs"] > before
        assert gt.pool(dev).block_info(a.data.ptr)["kind"] == "device"
        live = gt.stats(dev)["device"]["live_blocks"]
        del a
        gc.collect()
        assert gt.stats(dev)["device"]["live_blocks"] < live
    finally:
        cupy.cuda.set_allocator(None)
