"""GPOOL_TRACE output replays as-is with gpool-bench: the default stream is 0x0 (it was "(nil)",
which the replay rejected), the Kind column records each allocation's memory kind, and the
replay allocates that kind (strategies with device memory only skip host rows and say so)."""
import csv
import ctypes
import json
import os
import subprocess

import pytest

import gpool
from conftest import BUILD

MIB = 1 << 20
BENCH = os.path.join(BUILD, "gpool-bench")
SIM = os.path.join(BUILD, "sim", "libcuda.so.1")

pytestmark = pytest.mark.skipif(not os.path.exists(BENCH), reason="gpool-bench is not built")


def bench(*args):
    env = dict(os.environ, GPOOL_LIBCUDA=SIM)
    return subprocess.run([BENCH, *args, "--device", "sim"], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def streams():
    cuda = ctypes.CDLL(os.environ.get("GPOOL_LIBCUDA") or "libcuda.so.1")
    ctx = ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    made = []
    for _ in range(2):
        s = ctypes.c_void_p()
        assert cuda.cuStreamCreate(ctypes.byref(s), 1) == 0
        made.append(s.value)
    yield made
    destroy = getattr(cuda, "cuStreamDestroy_v2", None) or cuda.cuStreamDestroy
    for s in made:
        destroy(ctypes.c_void_p(s))
    cuda.cuDevicePrimaryCtxRelease_v2(0)


def test_gpool_trace_replays_with_its_kinds_and_streams(tmp_path, streams):
    path = tmp_path / "app.csv"
    s1, s2 = streams
    plan = [  # (size, kind, stream)
        (3 * MIB, "device", None),
        (4096, "device", None),
        (MIB + 7, "device", s1),
        (5 * MIB, "device", s1),
        (200000, "pinned", s2),
        (300, "pinned", None),
        (2 * MIB, "mapped", None),
        (70000, "mapped", s2),
    ]
    with gpool.Pool(trace=str(path)) as pool:
        ptrs = [(pool.alloc(size, kind=kind, stream=s), s) for size, kind, s in plan]
        for p, s in reversed(ptrs):
            pool.free(p, stream=s)
        pool.trim(0)
    rows = list(csv.reader(open(path)))
    assert rows[0] == ["Thread", "Time", "Action", "Pointer", "Size", "Stream", "Kind"]
    allocs = [r for r in rows[1:] if r[2] == "allocate"]
    frees = [r for r in rows[1:] if r[2] == "free"]
    assert [r[6] for r in allocs] == [k for _, k, _ in plan]
    assert [int(r[4]) for r in allocs] == [size for size, _, _ in plan]
    assert all(r[6] == "" for r in frees) and len(frees) == len(plan)
    assert [int(r[5], 16) for r in allocs] == [s or 0 for _, _, s in plan]
    assert not any("(nil)" in r[5] for r in rows[1:])

    out = bench("replay", str(path), "--strategy", "gpool", "--strategy", "bfc", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["trace"]["allocs"] == 8
    gp, bfc = res["strategies"]
    assert gp["status"] == "ok" and gp["allocs"] == 8 and gp["frees"] == 8
    assert gp["note"] == "replayed as traced: 4 device, 2 pinned, 2 mapped allocations"
    assert bfc["status"] == "ok" and bfc["frees"] == 4
    assert bfc["note"].startswith("4 pinned/mapped allocations of the trace not replayed")

    # --save-trace keeps the kinds (the Kind column is written when a trace has host kinds)
    saved = tmp_path / "saved.csv"
    out = bench("replay", str(path), "--strategy", "gpool", "--save-trace", str(saved))
    assert out.returncode == 0, out.stderr
    srows = list(csv.reader(open(saved)))
    assert srows[0][-1] == "Kind"
    assert [r[6] for r in srows[1:] if r[2] == "allocate"] == [k for _, k, _ in plan]

    # at the peak every block is live: the snapshot shows each kind where the trace put it
    snap_path = tmp_path / "peak.json"
    out = bench("replay", str(path), "--strategy", "gpool", "--snapshot", str(snap_path))
    assert out.returncode == 0, out.stderr
    snap = json.load(open(snap_path))
    st = snap["stats"]
    assert st["device"]["live_blocks"] == 4
    assert st["host_pinned"]["live_blocks"] == 2 and st["host_pinned"]["requested_bytes"] == 200300
    assert st["host_mapped"]["live_blocks"] == 2
    assert st["host_mapped"]["requested_bytes"] == 2 * MIB + 70000


def test_a_trace_with_nil_streams_replays(tmp_path):
    """Traces written before the fix (glibc's "(nil)" for the default stream) replay too."""
    path = tmp_path / "old.csv"
    path.write_text("Thread,Time,Action,Pointer,Size,Stream\n"
                    "7,10,allocate,0x7f0000000000,1048576,(nil)\n"
                    "7,20,allocate,0x7f0000200000,4096,0x5a\n"
                    "7,30,free,0x7f0000000000,1048576,(nil)\n"
                    "7,40,free,0x7f0000200000,4096,0x5a\n")
    out = bench("replay", str(path), "--strategy", "gpool", "--json")
    assert out.returncode == 0, out.stderr
    gp = json.loads(out.stdout)["strategies"][0]
    assert gp["status"] == "ok" and gp["allocs"] == 2 and gp["frees"] == 2 and gp["note"] == ""


def test_the_kind_column_is_checked(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("Thread,Time,Action,Pointer,Size,Stream,Kind\n"
                    "1,1,allocate,0x1000,100,0x0,vram\n")
    out = bench("replay", str(path), "--strategy", "gpool")
    assert out.returncode != 0
    assert "bad.csv:2: unknown kind \"vram\"" in out.stderr
    path.write_text("Thread,Time,Action,Pointer,Size,Stream,Kind\n1,1,allocate,0x1000,100,0x0\n")
    out = bench("replay", str(path), "--strategy", "gpool")
    assert out.returncode != 0 and "expected 7 columns" in out.stderr
