"""An outsider's campaign against the PyTorch / CuPy hooks of libgpool.so (gpool_torch_alloc,
gpool_torch_free and torch 2.1+'s setter functions), driven through ctypes the way
torch/csrc/cuda/CUDAPluggableAllocator.cpp calls them: alloc(size, device, current stream),
free(ptr, size, device, the stream the block was allocated on), beginAllocateToPool(device,
MempoolId_t by value, filter) before cudaStreamBeginCapture. Streams, events and captures go
through the simulated driver (build/sim/libcuda.so.1), whose referee counts stream-ordering
violations. Each scenario runs in its own process: the hooks' pools are per process and read
GPOOL_CONF once. Standard library and pytest only; no torch needed (its calls are modelled).
"""
import os
import subprocess
import sys
import textwrap

import pytest

LIB = os.environ.get("GPOOL_LIBRARY", "")
CUDA = os.environ.get("GPOOL_LIBCUDA", "")
pytestmark = pytest.mark.skipif(
    not (os.path.exists(LIB) and os.path.exists(CUDA)) or os.environ.get("GPOOL_TEST_REAL_GPU"),
    reason="needs build/libgpool.so and the simulated driver (make lib sim)")

# what every scenario starts with: the two libraries, a context, stream/event/touch helpers
PRELUDE = r'''
import ctypes, os, sys
cu = ctypes.CDLL(os.environ["GPOOL_LIBCUDA"])
g = ctypes.CDLL(os.environ["GPOOL_LIBRARY"])
vp = ctypes.c_void_p
g.gpool_torch_alloc.restype = vp
g.gpool_torch_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, vp]
g.gpool_torch_free.restype = None
g.gpool_torch_free.argtypes = [vp, ctypes.c_size_t, ctypes.c_int, vp]
g.gpool_torch_empty_cache.restype = None
g.gpool_last_error.restype = ctypes.c_char_p
class MP(ctypes.Structure):  # c10::cuda::MempoolId_t, passed by value
    _fields_ = [("first", ctypes.c_ulonglong), ("second", ctypes.c_ulonglong)]
g.gpool_torch_begin_allocate_to_pool.argtypes = [ctypes.c_int, MP, vp]
g.gpool_torch_release_pool.argtypes = [ctypes.c_int, MP]
class BS(ctypes.Structure):
    _fields_ = ([(n, ctypes.c_size_t) for n in ("blocks", "bytes", "requested_bytes", "limit")]
                + [("frees", ctypes.c_ulonglong), ("flushes", ctypes.c_ulonglong)]
                + [(n, ctypes.c_size_t) for n in ("graph_blocks", "graph_bytes")])
def bstats(d=0):
    s = BS(); assert g.gpool_torch_get_batch_stats(d, ctypes.byref(s)) == 0; return s
cu.gpoolsim_touch.argtypes = [vp, ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_int]
cu.gpoolsim_violations.restype = ctypes.c_ulong
assert cu.cuInit(0) == 0
_c = vp(); assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(_c), 0) == 0
assert cu.cuCtxSetCurrent(_c) == 0
def stream():  # torch's pool streams are non-blocking
    s = vp(); assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0; return s
def wait(dst, src):  # dst.wait_stream(src)
    e = vp(); assert cu.cuEventCreate(ctypes.byref(e), 2) == 0
    assert cu.cuEventRecord(e, src) == 0 and cu.cuStreamWaitEvent(dst, e, 0) == 0
def touch(s, p, n, w=1):  # a kernel on s
    r = cu.gpoolsim_touch(s, p, n, w); assert r == 0, r
def alloc(n, s=None):
    p = g.gpool_torch_alloc(n, 0, s)
    assert p, g.gpool_last_error()
    return p
def free(p, n, s=None):
    g.gpool_torch_free(p, n, 0, s)
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
def begin_capture(s, mode=GLOBAL):
    assert cu.cuStreamBeginCapture_v2(s, mode) == 0
def end_capture(s):
    graph = vp(); r = cu.cuStreamEndCapture(s, ctypes.byref(graph)); return r, graph
MB = 1 << 20
'''


def run(body, conf=None, env=None):
    """Run PRELUDE + body in a fresh interpreter; returns its stdout (fails on a non-zero exit
    or on a stream-ordering violation the script did not expect)."""
    e = dict(os.environ)
    e.pop("GPOOL_CONF", None)
    if conf:
        e["GPOOL_CONF"] = conf
    e.update(env or {})
    code = PRELUDE + textwrap.dedent(body) + "\nassert cu.gpoolsim_violations() == 0, 'violations'\n"
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, "scenario failed:\n%s\n%s" % (p.stdout, p.stderr)
    return p.stdout


# -- pattern 2: graph capture ---------------------------------------------------------------

def test_free_during_another_streams_global_capture_keeps_the_capture_valid():
    """torch.cuda.graph captures on its own stream in global mode; a tensor made before the
    capture on the default stream and dropped inside it reaches free(ptr, size, dev, default
    stream). With the batch at its limit the free hook flushed: a cuCtxSynchronize while a
    global capture runs, which the driver refuses and answers by invalidating the capture
    (cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). The free must not
    synchronize; the batch flushes at the next eager allocation instead."""
    out = run('''
        s = stream()
        x = alloc(MB); touch(None, x, MB)
        wait(s, None)
        begin_capture(s, GLOBAL)
        touch(s, x, MB)
        free(x, MB, None)          # del x inside the capture: the batch reaches its limit
        r, graph = end_capture(s)
        assert r == 0, "capture invalidated by the free: %d" % r
        y = alloc(MB); touch(None, y, MB)   # eager work after the capture: the batch flushes
        print("flushes", bstats().flushes, "batch", bstats().blocks)
    ''', conf="cudafree_batch=1M")
    assert "flushes 1 batch 0" in out, out


@pytest.mark.parametrize("reset_hook", [False, True])
def test_capture_after_side_stream_warmup_as_torch_docs_show(reset_hook):
    """The CUDA graphs recipe (torch docs, "Whole-network capture"): warm up on a side stream
    s, then torch.cuda.graph(g) captures on its own stream; its __enter__ runs
    torch.cuda.synchronize(), gc.collect(), torch.cuda.empty_cache() (gpool_torch_empty_cache
    where the reset setter is installed, torch 2.1+), then capture_begin: beginAllocateToPool,
    then cudaStreamBeginCapture. The capture's allocations must be served: the warm-up's
    blocks are free and the device idle. The warm-up's blocks wait in the batch pending on s
    (torch 2.0) or were given back by empty_cache (2.1+); the hooks ask for fresh pages then
    (GPOOL_ALLOC_IN_CAPTURE: mapped with the thread in relaxed capture mode), and the capture
    stays valid."""
    run('''
        s = stream(); cs = stream()
        wait(s, None)
        for i in range(3):
            a = alloc(4 * MB, s); touch(s, a, 4 * MB); b = alloc(4 * MB, s); touch(s, b, 4 * MB)
            free(a, 4 * MB, s); free(b, 4 * MB, s)
        wait(None, s)
        assert cu.cuCtxSynchronize() == 0
        if RESET:
            g.gpool_torch_empty_cache()
        g.gpool_torch_begin_allocate_to_pool(0, MP(1, 0), None)
        begin_capture(cs, GLOBAL)
        a = g.gpool_torch_alloc(4 * MB, 0, cs)
        msg = g.gpool_last_error()
        r, graph = end_capture(cs)
        assert a, msg
        assert r == 0
    '''.replace("RESET", repr(reset_hook)))


def test_eager_tensor_freed_inside_capture_is_held_while_the_graph_lives():
    """docs/python.md: "blocks freed inside [a capture] are held out of all reuse once freed,
    since the graph replays on their addresses". A tensor allocated before the capture on the
    default stream, used by the captured work and dropped inside the capture reaches the free
    hook with the default stream (its own), which is not capturing: it went to the batch and
    eager work got its address while the graph (pool begun, not released) may still replay.
    Also, releasing graph memory during the capture must not synchronize (it would invalidate
    the capture)."""
    run('''
        s = stream()
        w = alloc(4 * MB, s); touch(s, w, 4 * MB); free(w, 4 * MB, s)   # warm-up on s
        x = alloc(4 * MB); touch(None, x, 4 * MB)
        wait(s, None)
        g.gpool_torch_begin_allocate_to_pool(0, MP(1, 0), None)   # capture_begin
        begin_capture(s, GLOBAL)
        y = alloc(4 * MB, s); touch(s, y, 4 * MB)   # the capture's first allocation
        touch(s, x, 4 * MB)                # the graph uses x at every replay
        free(x, 4 * MB, None)              # del x inside the capture
        assert g.gpool_torch_release_graph_memory() != 0   # refused: no synchronize now
        r, graph = end_capture(s)
        assert r == 0, r
        assert bstats().graph_blocks == 1
        g.gpool_torch_empty_cache()
        eager = [alloc(4 * MB) for _ in range(4)]
        assert x not in eager, "eager block got the graph's memory"
        g.gpool_torch_release_pool(0, MP(1, 0))    # the graph is reset: x comes back
        assert bstats().graph_blocks == 0
    ''')


# -- pattern 7: bad inputs through the hooks ------------------------------------------------

def test_double_free_of_a_batched_block_is_reported_and_not_queued_twice():
    """free(ptr) twice (a program bug the hook sees while the block still waits in the batch)
    was queued twice, silently: the batch counted the block twice (blocks 2, bytes twice the
    block; memory_stats() subtracts the batch, so allocated bytes went low by a block) and the
    flush freed it twice. The second free must be refused with a clear message, the batch
    must hold it once, and the pool must stay usable."""
    out = run('''
        x = alloc(MB); touch(None, x, MB)
        free(x, MB)
        b1 = bstats()
        free(x, MB)
        msg = g.gpool_last_error().decode()
        b2 = bstats()
        print("msg", msg)
        assert (b2.blocks, b2.bytes, b2.requested_bytes) == (b1.blocks, b1.bytes,
                b1.requested_bytes), (b1.blocks, b2.blocks, b1.bytes, b2.bytes)
        g.gpool_torch_empty_cache()
        assert bstats().blocks == 0
        y = alloc(MB); touch(None, y, MB); free(y, MB)
        z = alloc(3 * MB); touch(None, z, 3 * MB); free(z, 3 * MB)
    ''')
    assert "freed already" in out, out


def test_oom_during_capture_says_why():
    """An allocation on a capturing stream that gpool cannot serve returns NULL (PyTorch: CUDA
    out of memory) and gpool_last_error() must say why. With blocks of another stream waiting
    in the free batch, the flush the hook tries first fails (no synchronize during a capture)
    and its recovery cleared the message: PyTorch's OOM report got an empty reason."""
    out = run('''
        s = stream(); cs = stream()
        a = alloc(4 * MB, s); touch(s, a, 4 * MB); free(a, 4 * MB, s)   # waits in the batch
        begin_capture(cs, GLOBAL)
        p = g.gpool_torch_alloc(256 * MB, 0, cs)   # more than the device has
        msg = g.gpool_last_error().decode()
        r, graph = end_capture(cs)
        assert p is None and r == 0, (p, r)
        print("msg", msg)
    ''', env={"GPOOL_SIM_MEMORY": "128M"})
    assert "capturing" in out, out


def test_alloc_in_a_forked_child_says_why():
    """fork after enable(): the child's driver answers CUDA_ERROR_NOT_INITIALIZED (as a real one
    does). Its allocation must fail cleanly with the reason, not an empty message (the batch
    flush's failed synchronize cleared it), and the parent must go on."""
    out = run('''
        s = stream()
        x = alloc(MB, s); touch(s, x, MB); free(x, MB, s)     # a block in the batch
        pid = os.fork()
        if pid == 0:
            p = g.gpool_torch_alloc(MB, 0, None)
            msg = g.gpool_last_error().decode()
            g.gpool_torch_free(x, MB, 0, s)
            g.gpool_torch_empty_cache()
            os._exit(0 if p is None and "fork" in msg else 3)
        _, status = os.waitpid(pid, 0)
        print("child", status)
        y = alloc(MB, s); touch(s, y, MB); free(y, MB, s)
    ''', env={"GPOOL_SIM_FORK": "driver"})
    assert "child 0" in out, out


# -- pattern 5: CuPy streams ----------------------------------------------------------------

@pytest.mark.parametrize("order", ["free_then_destroy", "destroy_then_free"])
def test_blocks_of_a_destroyed_stream_come_back(order):
    """``with cupy.cuda.Stream():`` arrays often outlive their stream: CuPy destroys the stream
    when its object is collected, before or after the array is dropped (gpool.cupy frees the
    block on the stream it was allocated on). The hooks' free batch hands the block to the pool
    only at its flush, when the stream is gone; the pool then asked the dead handle for its
    context, classed it "another context, completion unknown", and every later
    empty_cache()/trim failed ("cuStreamSynchronize (a stream of another context)"): the memory
    stayed reserved for good and the block was never reused."""
    out = run('''
        sys.path.insert(0, os.environ["GPOOL_PYDIR"])
        import gpool.torch as gt
        cu.gpoolsim_destroyed_stream_calls.restype = ctypes.c_ulong
        d = stream()
        z = alloc(8 * MB, d); touch(d, z, 8 * MB)
        if ORDER == "free_then_destroy":
            free(z, 8 * MB, d); cu.cuStreamDestroy_v2(d)
        else:
            cu.cuStreamDestroy_v2(d); free(z, 8 * MB, d)
        g.gpool_torch_empty_cache()
        w = alloc(8 * MB); touch(None, w, 8 * MB)
        print("reused", w == z)
        free(w, 8 * MB)
        g.gpool_torch_empty_cache()
        print("reserved", gt.memory_reserved(0), "dead-handle calls",
              cu.gpoolsim_destroyed_stream_calls())
    '''.replace("ORDER", repr(order)), env={"GPOOL_PYDIR": os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))})
    assert "reused True" in out and "reserved 0 " in out, out
    if order == "free_then_destroy":  # the free hook itself may ask a handle it is given
        assert "dead-handle calls 0" in out, out


# -- pattern 4: statistics and snapshots with graph memory ---------------------------------

GRAPH_STATS = '''
    sys.path.insert(0, os.environ["GPOOL_PYDIR"])
    import gpool.torch as gt
    s = stream()
    g.gpool_torch_begin_allocate_to_pool(0, MP(1, 0), None)   # capture_begin (torch 2.3+)
    w1 = alloc(8 * MB, s); w2 = alloc(8 * MB, s)               # warm-up on the capture stream
    free(w1, 8 * MB, s); free(w2, 8 * MB, s)
    begin_capture(s, GLOBAL)
    tmp = alloc(8 * MB, s); out = alloc(8 * MB, s)
    free(tmp, 8 * MB, s)                                        # freed inside the capture
    r, graph = end_capture(s)
    assert r == 0, r
    def state():
        m = gt.memory_stats(0); sn = gt.snapshot(0)
        active = sum(b["size"] for x in sn["segments"] for b in x["blocks"]
                     if b["state"] == "active_allocated")
        return m["allocated_bytes.all.current"], m["allocation.all.current"], active
'''
PYDIR_ENV = {"GPOOL_PYDIR": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}


def test_memory_stats_do_not_count_freed_graph_blocks_as_allocated():
    """Graph blocks PyTorch freed (an intermediate freed inside the capture, the graph's output
    freed after it) are held by the hooks, but they are not PyTorch's live tensors: the
    snapshot shows them active_pending_free, and memory_stats() must agree (allocated ==
    the active blocks' bytes). It counted them allocated: 16 MiB and 2 allocations with no
    tensor alive."""
    out = run(GRAPH_STATS + '''
    print("capture", state())
    free(out, 8 * MB, s)
    print("freed", state())
    ''', env=PYDIR_ENV)
    assert "capture (8388608, 1, 8388608)" in out and "freed (0, 0, 0)" in out, out


def test_snapshot_after_graph_release_shows_no_live_blocks():
    """Once the last graph pool is released (CUDAGraph.reset: release_pool) the held graph
    blocks go back to the pool. They were freed on the pool's default stream instead of their
    own, which defers such a free behind an event: the snapshot then drew both blocks
    active_allocated (16 MiB) while memory_stats() said 0 allocated."""
    out = run(GRAPH_STATS + '''
    free(out, 8 * MB, s)
    g.gpool_torch_release_pool(0, MP(1, 0))
    print("released", state(), bstats().graph_blocks)
    ''', env=PYDIR_ENV)
    assert "released (0, 0, 0) 0" in out, out


def test_max_memory_allocated_is_the_peak_of_memory_allocated():
    """torch.cuda.max_memory_allocated() is the peak of memory_allocated() (PyTorch lowers
    allocated_bytes when a tensor is freed, even with stream uses pending). memory_allocated()
    here leaves the free batch out, but the peak is gpool's in-use peak, which counts it:
    one 64 MiB tensor freed, then another allocated, reads current 64 MiB, peak 128 MiB."""
    out = run('''
        sys.path.insert(0, os.environ["GPOOL_PYDIR"])
        import gpool.torch as gt
        s = stream()
        a = alloc(64 * MB, s); touch(s, a, 64 * MB); free(a, 64 * MB, s)
        b = alloc(64 * MB, s); touch(s, b, 64 * MB)
        print("allocated", gt.memory_allocated(0) >> 20, gt.max_memory_allocated(0) >> 20)
        m = gt.memory_stats(0)
        print("requested peak", m["requested_bytes.all.peak"] >> 20)
        free(b, 64 * MB, s)
        gt.reset_peak_memory_stats(0)            # exact after a reset too
        c = alloc(MB, s); touch(s, c, MB)
        print("after reset", gt.max_memory_allocated(0) >> 20)
    ''', env=PYDIR_ENV)
    assert "allocated 64 64" in out and "requested peak 64" in out, out
    assert "after reset 1" in out, out
