"""Every binding checks its arguments before ctypes sees them (issue 25): sizes and addresses
are ints in 0..2**64-1, streams ints or objects with cuda_stream/ptr/handle, kinds, usages and
flags by name or by their enum value. A value of the wrong type raises gpool.ArgumentTypeError
(a gpool.Error and a TypeError), one out of range gpool.ArgumentValueError (a gpool.Error and a
ValueError); both carry GPOOL_ERR_INVALID_ARG and name the argument."""
import ctypes
import os
import subprocess
import sys

import pytest

import gpool

MIB = 1 << 20


@pytest.fixture
def pool():
    with gpool.Pool() as p:
        yield p


def _live(pool):
    return pool.stats()["total"]["live_blocks"]


def test_size_above_2_64_is_not_wrapped(pool):
    # ctypes used to wrap (1 << 64) + 4096 to a 4096-byte block
    with pytest.raises(ValueError) as e:
        pool.alloc((1 << 64) + 4096)
    assert isinstance(e.value, gpool.Error) and e.value.status == gpool.ERR_INVALID_ARG
    assert "size" in str(e.value) and str((1 << 64) + 4096) in str(e.value)
    assert _live(pool) == 0


def test_size_2_64_is_not_zero(pool):
    # ctypes used to wrap 1 << 64 to 0: None, as if it had succeeded
    with pytest.raises(gpool.Error) as e:
        pool.alloc(1 << 64)
    assert isinstance(e.value, ValueError) and e.value.status == gpool.ERR_INVALID_ARG
    assert _live(pool) == 0


def test_negative_size_is_a_value_error_naming_it(pool):
    with pytest.raises(ValueError) as e:
        pool.alloc(-4096)
    assert isinstance(e.value, gpool.Error)
    assert "-4096" in str(e.value) and "18446744073709547520" not in str(e.value)


def test_size_as_a_string_is_a_type_error(pool):
    with pytest.raises(TypeError) as e:
        pool.alloc("1M")
    assert isinstance(e.value, gpool.Error) and e.value.status == gpool.ERR_INVALID_ARG
    assert not isinstance(e.value, ctypes.ArgumentError)
    assert "size" in str(e.value) and "'1M'" in str(e.value)


@pytest.mark.parametrize("bad", [1.5, True, None, b"1"])
def test_other_size_types_are_type_errors(pool, bad):
    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(bad)


def test_largest_size_reaches_the_library_as_out_of_memory(pool):
    with pytest.raises(gpool.Error) as e:
        pool.alloc((1 << 64) - 1)
    assert e.value.status in (gpool.ERR_OUT_OF_MEMORY, gpool.ERR_INVALID_ARG)
    assert not isinstance(e.value, (TypeError, ValueError))


def test_index_objects_are_sizes(pool):
    class N:
        def __index__(self):
            return MIB

    p = pool.alloc(N())
    assert pool.block_info(p)["requested_size"] == MIB
    pool.free(p)


def test_alignment_page_size_flags_checked(pool):
    with pytest.raises(gpool.ArgumentValueError):
        pool.alloc(MIB, alignment=-1)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(MIB, page_size="2M")
    with pytest.raises(gpool.ArgumentValueError):
        pool.alloc(MIB, flags=1 << 40)
    with pytest.raises(gpool.ArgumentValueError) as e:
        pool.alloc(MIB, flags=["zero", "fast"])
    assert "'fast'" in str(e.value)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(MIB, flags=2.0)
    p = pool.alloc(MIB, flags=["zero"])
    pool.free(p)


def test_kinds_and_usages_by_name_or_enum(pool):
    p = pool.alloc(MIB, kind=2)
    assert pool.block_info(p)["kind"] == "pinned"
    pool.free(p)
    p = pool.alloc(MIB, kind="Pinned", usage="READBACK")
    pool.free(p)
    with pytest.raises(gpool.ArgumentValueError) as e:
        pool.alloc(MIB, kind=7)
    assert "kind" in str(e.value)
    with pytest.raises(gpool.ArgumentValueError):
        pool.alloc(MIB, usage=99)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(MIB, kind=1.0)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.page_size(MIB, kind=None)


def test_streams_checked(pool):
    with pytest.raises(gpool.ArgumentTypeError) as e:
        pool.alloc(MIB, stream="s")
    assert "stream" in str(e.value)
    with pytest.raises(gpool.ArgumentValueError):
        pool.alloc(MIB, stream=-1)
    with pytest.raises(gpool.ArgumentValueError):
        pool.alloc(MIB, stream=1 << 64)

    class Bad:
        cuda_stream = "x"

    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(MIB, stream=Bad())
    with pytest.raises(gpool.ArgumentTypeError):
        pool.alloc(MIB, stream=object())

    class Legacy:
        cuda_stream = 0

    p = pool.alloc(MIB, stream=Legacy())
    pool.free(p, stream=Legacy())


def test_addresses_checked(pool):
    with pytest.raises(gpool.ArgumentValueError):
        pool.free(1 << 64)
    with pytest.raises(gpool.ArgumentValueError):
        pool.free(-1)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.free("0x1000")
    with pytest.raises(gpool.ArgumentTypeError):
        pool.block_info(1.0)
    with pytest.raises(gpool.ArgumentValueError):
        pool.record_stream(1 << 65, None)
    with pytest.raises(gpool.ArgumentValueError):
        pool.trim(-1)
    with pytest.raises(gpool.ArgumentTypeError):
        pool.trim("all")
    p = pool.alloc(MIB)
    pool.free(ctypes.c_void_p(p))  # a c_void_p address is taken too


def test_device_checked():
    with pytest.raises(gpool.ArgumentTypeError):
        gpool.Pool(device="0")
    with pytest.raises(gpool.ArgumentValueError):
        gpool.Pool(device=-1)
    with pytest.raises(gpool.ArgumentValueError):
        gpool.Pool(device=1 << 40)


def test_error_text_does_not_repeat_the_call(pool):
    p = pool.alloc(MIB)
    pool.free(p)
    with pytest.raises(gpool.Error) as e:
        pool.free(p)
    text = str(e.value)
    assert text.startswith("gpool_free: invalid pointer: ")
    assert text.count("gpool_free") == 1, text
    assert "%#x" % p in text


def test_cupy_without_cupy_is_a_clear_error():
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import gpool.cupy\n"
            "try:\n"
            "    gpool.cupy.allocator(1024)\n"
            "except RuntimeError as e:\n"
            "    print('ERR', e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gpool.__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERR gpool.cupy: CuPy is not installed"), out.stdout


def test_cupy_pinned_allocator_with_a_stand_in_cupy(monkeypatch):
    import gc
    import sys
    import types

    import gpool.cupy

    class PinnedMemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr, self.size = mem, mem.ptr + offset, mem.size - offset

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        pinned_memory=types.SimpleNamespace(PinnedMemoryPointer=PinnedMemoryPointer)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    mp = gpool.cupy.pinned_allocator(3 * MIB)
    pool = gpool.cupy._pinned()
    assert mp.ptr and pool.block_info(mp.ptr)["kind"] == "pinned"
    assert pool.stats()["pinned"]["live_blocks"] == 1
    ctypes.memset(mp.ptr, 7, 3 * MIB)  # host memory: the CPU writes it
    del mp
    gc.collect()
    assert pool.stats()["pinned"]["live_blocks"] == 0
    assert gpool.cupy.pinned_allocator(0).ptr == 0
    with pytest.raises(gpool.ArgumentValueError):
        gpool.cupy.pinned_allocator(-1)
