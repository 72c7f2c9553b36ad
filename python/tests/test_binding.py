"""gpool.Pool over libgpool.so on the simulated driver: allocation of every kind, frees,
errors, stats, snapshots, block_info, trim."""
import json
import os

import pytest

import gpool

MIB = 1 << 20


@pytest.fixture
def pool():
    with gpool.Pool() as p:
        yield p


def test_library_found_and_versioned():
    assert os.path.isabs(gpool.library_path())
    assert gpool.version().count(".") == 2


def test_alloc_each_kind_reports_that_kind(pool):
    blocks = {k: pool.alloc(3 * MIB + 5, kind=k) for k in ("device", "pinned", "mapped")}
    for kind, ptr in blocks.items():
        assert isinstance(ptr, int) and ptr
        info = pool.block_info(ptr)
        assert info["kind"] == kind
        assert info["requested_size"] == 3 * MIB + 5
        assert info["size"] >= info["requested_size"]
        assert (info["host_ptr"] is None) == (kind == "device")
        # an interior address names the same block
        assert pool.block_info(ptr + 4096)["requested_size"] == 3 * MIB + 5
    s = pool.stats()
    for kind in blocks:
        assert s[kind]["live_blocks"] == 1
        assert s[kind]["requested_bytes"] == 3 * MIB + 5
    assert s["total"]["live_blocks"] == 3
    for ptr in blocks.values():
        pool.free(ptr)
    s = pool.stats()
    assert s["total"]["live_blocks"] == 0 and s["total"]["frees"] == 3


def test_auto_kind_follows_the_usage_hint(pool):
    up = pool.alloc(MIB, kind="auto", usage="upload")
    rb = pool.alloc(MIB, kind="auto", usage="readback")
    assert pool.block_info(up)["kind"] == "mapped"
    assert pool.block_info(up)["usage"] == "upload"
    assert pool.block_info(rb)["kind"] == "pinned"
    pool.free(up)
    pool.free(rb)


def test_zero_size_is_none_and_free_none_is_noop(pool):
    assert pool.alloc(0) is None
    pool.free(None)


def test_errors_carry_status_and_last_error(pool):
    p = pool.alloc(MIB)
    pool.free(p)
    with pytest.raises(gpool.Error) as e:
        pool.free(p)
    assert e.value.status == gpool.ERR_INVALID_POINTER == 3
    assert e.value.status_name == "GPOOL_ERR_INVALID_POINTER"
    assert e.value.call == "gpool_free"
    assert "%#x" % p in e.value.message  # gpool_last_error names the pointer
    with pytest.raises(gpool.Error) as e:
        pool.block_info(p)
    assert e.value.status == gpool.ERR_INVALID_POINTER
    with pytest.raises(gpool.Error) as e:
        pool.alloc(MIB, alignment=3)
    assert e.value.status == gpool.ERR_INVALID_ARG and "power of two" in e.value.message
    with pytest.raises(gpool.Error) as e:
        pool.alloc(MIB, kind="vram")
    assert e.value.status == gpool.ERR_INVALID_ARG and "'vram'" in str(e.value)


def test_out_of_memory_is_an_error_with_the_numbers():
    with gpool.Pool(budget_device="8M") as pool:
        p = pool.alloc(6 * MIB)
        with pytest.raises(gpool.Error) as e:
            pool.alloc(4 * MIB)
        assert e.value.status == gpool.ERR_OUT_OF_MEMORY
        assert "budget" in e.value.message
        pool.free(p)


def test_bad_config_names_the_key():
    with pytest.raises(gpool.Error) as e:
        gpool.Pool(no_such_key=1)
    assert e.value.status == gpool.ERR_CONFIG and "no_such_key" in e.value.message
    with pytest.raises(gpool.Error) as e:
        gpool.Pool(small_max="lots")
    assert e.value.status == gpool.ERR_CONFIG and "small_max" in e.value.message


def test_stream_reuse_keyword_reaches_the_config():
    assert gpool.make_config(env=False).stream_reuse == 0  # wait, the default
    assert gpool.make_config(env=False, stream_reuse="events").stream_reuse == 1
    with gpool.Pool(stream_reuse="events") as pool:
        pool.free(pool.alloc(4 * MIB))
    with pytest.raises(gpool.Error) as e:
        gpool.Pool(stream_reuse="sometimes")
    assert e.value.status == gpool.ERR_CONFIG and "stream_reuse" in e.value.message


def test_absent_device_is_no_device():
    with pytest.raises(gpool.Error) as e:
        gpool.Pool(device=7)
    assert e.value.status == gpool.ERR_NO_DEVICE


def test_config_keywords_reach_the_pool(tmp_path):
    trace = tmp_path / "t.csv"
    with gpool.Pool(tcache_bytes=0, small_max="4K", trace=str(trace)) as pool:
        p = pool.alloc(8192)  # above small_max: a large block, so not a thread-cache hit
        pool.free(p)
        assert pool.stats()["tcache_hits"] == 0
    rows = trace.read_text().splitlines()
    assert rows[0].startswith("Thread,Time,Action,Pointer,Size,Stream")
    assert len(rows) == 3


def test_stats_counters_move(pool):
    before = pool.stats()
    ptrs = [pool.alloc(4 * MIB) for _ in range(3)]
    mid = pool.stats()
    assert mid["device"]["allocs"] == before["device"]["allocs"] + 3
    assert mid["device"]["in_use_bytes"] >= 12 * MIB
    assert mid["device"]["reserved_bytes"] >= 12 * MIB
    assert mid["driver_calls_total"] > before["driver_calls_total"]
    assert mid["driver_calls"]["cuMemMap"] >= 1
    assert sum(mid["driver_calls"].values()) == mid["driver_calls_total"]
    for p in ptrs:
        pool.free(p)
    after = pool.stats()
    assert after["device"]["in_use_bytes"] == 0
    assert after["device"]["cached_bytes"] == after["device"]["reserved_bytes"] > 0
    # the same again is served from the cache: no driver call
    again = [pool.alloc(4 * MIB) for _ in range(3)]
    assert pool.stats()["driver_calls_total"] == after["driver_calls_total"]
    for p in again:
        pool.free(p)


def test_trim_gives_cached_memory_back(pool):
    p = pool.alloc(16 * MIB)
    pool.free(p)
    assert pool.stats()["device"]["cached_bytes"] >= 16 * MIB
    pool.trim(0)
    assert pool.stats()["device"]["reserved_bytes"] == 0


def test_snapshot_is_the_json_dump(pool):
    p = pool.alloc(3 * MIB)
    snap = pool.snapshot()
    assert json.loads(pool.snapshot_json()) == pool.snapshot()
    assert snap["device"] == 0
    assert snap["stats"]["total"]["in_use_bytes"] >= 3 * MIB
    ranges = [r for region in snap["arenas"]["device"] for r in region["ranges"]]
    mine = [r for r in ranges if r["addr"] == p]
    assert mine and mine[0]["state"] == "in_use" and mine[0]["requested"] == 3 * MIB
    pool.free(p)
    ranges = [r for region in pool.snapshot()["arenas"]["device"] for r in region["ranges"]]
    assert all(r["state"] != "in_use" for r in ranges)


def test_streams_from_the_simulated_driver(pool):
    import ctypes

    cuda = ctypes.CDLL(os.environ.get("GPOOL_LIBCUDA") or "libcuda.so.1")
    ctx = ctypes.c_void_p()
    # the pool retained device 0's primary context; make it current for cuStreamCreate
    assert cuda.cuInit(0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    s = ctypes.c_void_p()
    assert cuda.cuStreamCreate(ctypes.byref(s), 1) == 0  # CU_STREAM_NON_BLOCKING
    try:
        p = pool.alloc(MIB, stream=s.value)
        assert pool.block_info(p)["stream"] == s.value
        pool.free(p, stream=s.value)
        # reused at once on the same stream (stream-ordered reuse)
        q = pool.alloc(MIB, stream=s)  # a ctypes handle works too
        assert q == p
        pool.free(q, stream=s)
        pool.trim(0)
    finally:
        destroy = getattr(cuda, "cuStreamDestroy_v2", None) or cuda.cuStreamDestroy
        destroy(s)
        cuda.cuDevicePrimaryCtxRelease_v2(0)


def test_close_reports_live_blocks():
    pool = gpool.Pool()
    pool.alloc(MIB)
    with pytest.raises(gpool.Error) as e:
        pool.close()
    assert e.value.status == gpool.ERR_LIVE_BLOCKS
    pool.close()  # closed already: nothing happens
    with pytest.raises(gpool.Error):
        pool.alloc(1)


def test_mem_get_info_and_page_size(pool):
    free, total = pool.mem_get_info()
    assert 0 < free <= total
    assert pool.page_size(64 * MIB) >= 2 * MIB
