"""gpool.torch's PyTorch-named statistics on the hooks' pool (simulated driver): a freed block
waiting in the hooks' free batch is no longer counted allocated; memory_stats() carries
torch.cuda.memory_stats()'s key names; peaks reset."""
import gpool.torch as gt
from gpool import _lib

MIB = 1 << 20


def test_freed_block_in_the_batch_is_not_allocated():
    lib = _lib.load()
    before = gt.memory_allocated(0)
    p = lib.gpool_torch_alloc(5 * MIB, 0, None)
    assert p
    assert gt.memory_allocated(0) >= before + 5 * MIB
    lib.gpool_torch_free(p, 5 * MIB, 0, None)
    b = gt.batch_stats(0)
    assert b["blocks"] >= 1 and b["requested_bytes"] >= 5 * MIB and b["limit"] >= 64 * MIB
    assert gt.memory_allocated(0) == before
    gt.empty_cache()
    assert gt.batch_stats(0)["blocks"] == 0 and gt.batch_stats(0)["flushes"] >= 1


def test_memory_stats_keys_and_peaks():
    lib = _lib.load()
    ptrs = [lib.gpool_torch_alloc(4 * MIB, 0, None) for _ in range(4)]
    m = gt.memory_stats(0)
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "active_bytes.all.current", "requested_bytes.all.current",
                "allocation.all.current", "allocation.all.allocated", "allocation.all.freed",
                "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc"):
        assert key in m, key
    assert m["allocated_bytes.all.current"] >= 16 * MIB
    assert m["reserved_bytes.all.current"] >= m["allocated_bytes.all.current"]
    assert gt.max_memory_allocated(0) >= 16 * MIB
    assert gt.memory_reserved(0) == m["reserved_bytes.all.current"]
    for p in ptrs:
        lib.gpool_torch_free(p, 4 * MIB, 0, None)
    gt.empty_cache()
    gt.reset_peak_memory_stats(0)
    assert gt.max_memory_allocated(0) == gt.memory_allocated(0) < 16 * MIB
    q = lib.gpool_torch_alloc(MIB, 0, None)
    assert gt.max_memory_allocated(0) >= MIB
    lib.gpool_torch_free(q, MIB, 0, None)
    gt.empty_cache()  # the hooks' pool is the process's: leave it empty for the next test


def test_release_graph_memory_without_graphs_is_ok():
    gt.release_graph_memory()
    b = gt.batch_stats(0)
    assert b["graph_blocks"] == 0 and b["graph_bytes"] == 0
