"""`gpool-bench import` (tools/snapshot_import.py): a PyTorch memory snapshot, built here from
the documented format of torch.cuda.memory._snapshot() (segments; device_traces: per device a
list of {action, addr, size, stream, time_us, frames}), becomes replay CSV: one file per
device, frees at free_completed, streams kept; the CSV replays with gpool-bench."""
import csv
import json
import os
import pickle
import subprocess
import sys

import pytest

from conftest import BUILD, REPO

MIB = 1 << 20
TOOL = os.path.join(REPO, "tools", "snapshot_import.py")
BENCH = os.path.join(BUILD, "gpool-bench")
SIM = os.path.join(BUILD, "sim", "libcuda.so.1")
S1, S2 = 0x55AA00, 0x77BB00  # two non-default streams (cudaStream_t values)

sys.path.insert(0, os.path.dirname(TOOL))
import snapshot_import  # noqa: E402


def ev(action, addr, size, stream, t, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
         "frames": [{"filename": "model.py", "line": 10, "name": "forward"}]}
    e.update(extra)
    return e


def fixture_snapshot():
    base0, base1 = 0x7F0000000000, 0x7E0000000000
    dev0 = [
        ev("segment_alloc", base0, 20 * MIB, 0, 1),
        ev("free_completed", base0 - MIB, 512, 0, 2),  # allocated before recording began
        ev("alloc", base0, 4 * MIB, 0, 3),
        ev("alloc", base0 + 4 * MIB, MIB, S1, 4),
        ev("alloc", base0 + 5 * MIB, 2 * MIB, S2, 5),
        ev("free_requested", base0 + 4 * MIB, MIB, S1, 6),
        ev("alloc", base0 + 7 * MIB, 3 * MIB, 0, 7),
        # the S1 block was used on another stream too: its memory returns only now
        ev("free_completed", base0 + 4 * MIB, MIB, S1, 8),
        ev("free_requested", base0, 4 * MIB, 0, 9),
        ev("free_completed", base0, 4 * MIB, 0, 9),
        {"action": "oom", "size": 64 * MIB, "stream": 0, "device_free": 3 * MIB,
         "time_us": 10, "frames": []},
        ev("alloc", base0, 2 * MIB, S2, 11),  # address reused
        ev("free_requested", base0 + 5 * MIB, 2 * MIB, S2, 12),  # completion cut off
        ev("snapshot", 0, 0, 0, 13),
        ev("free_requested", base0, 2 * MIB, S2, 14),
        ev("free_completed", base0, 2 * MIB, S2, 15),
        ev("segment_free", base0, 20 * MIB, 0, 16),
    ]  # base0 + 7 MiB stays live
    dev1 = [
        ev("alloc", base1, 6 * MIB, 0, 100),
        ev("alloc", base1 + 6 * MIB, 300, S1, 101),
        ev("free_requested", base1 + 6 * MIB, 300, S1, 102),
        ev("free_completed", base1 + 6 * MIB, 300, S1, 103),
        ev("free_requested", base1, 6 * MIB, 0, 104),
        ev("free_completed", base1, 6 * MIB, 0, 105),
    ]
    segments = [{"device": 0, "address": base0, "total_size": 20 * MIB, "stream": 0,
                 "segment_type": "large", "allocated_size": 3 * MIB, "active_size": 3 * MIB,
                 "blocks": [{"size": 3 * MIB, "state": "active_allocated", "frames": []}]}]
    return {"segments": segments, "device_traces": [dev0, dev1, []]}


@pytest.fixture
def snap_path(tmp_path):
    path = tmp_path / "snap.pickle"
    with open(path, "wb") as f:
        pickle.dump(fixture_snapshot(), f)
    return path


def rows(path):
    r = list(csv.reader(open(path)))
    assert r[0] == ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]
    return [(int(t), a, int(p, 16), int(s), int(st, 16)) for _, t, a, p, s, st in r[1:]]


def test_two_devices_become_two_files_with_frees_at_completion(snap_path, tmp_path):
    out = tmp_path / "trace.csv"
    paths = snapshot_import.convert(str(snap_path), str(out), quiet=True)
    assert paths == {0: str(tmp_path / "trace-dev0.csv"), 1: str(tmp_path / "trace-dev1.csv")}
    b = 0x7F0000000000
    assert rows(paths[0]) == [
        # freed at 2 us but allocated before the history began: allocated at time 0
        (0, "allocate", b - MIB, 512, 0),
        (0, "free", b - MIB, 512, 0),  # times: ns from the first recorded row (2 us)
        (1000, "allocate", b, 4 * MIB, 0),
        (2000, "allocate", b + 4 * MIB, MIB, S1),
        (3000, "allocate", b + 5 * MIB, 2 * MIB, S2),
        (5000, "allocate", b + 7 * MIB, 3 * MIB, 0),
        (6000, "free", b + 4 * MIB, MIB, S1),  # at free_completed (8 us), not requested (6)
        (7000, "free", b, 4 * MIB, 0),
        (8000, "allocate failure", 0, 64 * MIB, 0),
        (9000, "allocate", b, 2 * MIB, S2),
        (10000, "free", b + 5 * MIB, 2 * MIB, S2),  # completion cut off: at free_requested
        (13000, "free", b, 2 * MIB, S2),
    ]
    r1 = rows(paths[1])
    assert [(a, s, st) for _, a, _, s, st in r1] == [
        ("allocate", 6 * MIB, 0), ("allocate", 300, S1), ("free", 300, S1), ("free", 6 * MIB, 0)]
    assert r1[0][0] == 0 and r1[-1][0] == 5000


def test_device_option_and_single_device_name(snap_path, tmp_path):
    out = tmp_path / "one.csv"
    assert snapshot_import.convert(str(snap_path), str(out), device=1, quiet=True) == {1: str(out)}
    assert len(rows(out)) == 4
    with pytest.raises(snapshot_import.SnapshotError, match="no allocation events"):
        snapshot_import.convert(str(snap_path), str(out), device=2, quiet=True)
    with pytest.raises(snapshot_import.SnapshotError, match="no device 5"):
        snapshot_import.convert(str(snap_path), str(out), device=5, quiet=True)


def test_a_snapshot_without_history_says_what_to_do(tmp_path):
    path = tmp_path / "nohist.pickle"
    pickle.dump({"segments": []}, open(path, "wb"))
    with pytest.raises(snapshot_import.SnapshotError, match="_record_memory_history"):
        snapshot_import.convert(str(path), str(tmp_path / "x.csv"), quiet=True)


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch %s" % (tmp_path / "pwned"),))

    path = tmp_path / "evil.pickle"
    pickle.dump({"device_traces": [[Evil()]]}, open(path, "wb"))
    with pytest.raises(snapshot_import.SnapshotError, match="refusing"):
        snapshot_import.convert(str(path), str(tmp_path / "x.csv"), quiet=True)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.skipif(not os.path.exists(BENCH), reason="gpool-bench is not built")
def test_gpool_bench_import_then_replay(snap_path, tmp_path):
    env = dict(os.environ, GPOOL_LIBCUDA=SIM)
    out = subprocess.run([BENCH, "import", str(snap_path), "-o", str(tmp_path / "t.csv")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "t-dev0.csv: device 0: 6 allocations, 5 frees, 3 streams" in out.stderr
    assert "1 blocks freed that the history never saw allocated" in out.stderr
    assert "1 freed at free_requested" in out.stderr and "1 blocks still live" in out.stderr
    rep = subprocess.run([BENCH, "replay", str(tmp_path / "t-dev0.csv"), "--strategy", "gpool",
                          "--strategy", "bfc", "--json", "--device", "sim"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    res = json.loads(rep.stdout)
    assert res["trace"]["allocs"] == 6 and res["trace"]["skipped_failure_rows"] == 1
    for s in res["strategies"]:
        assert s["status"] == "ok" and s["allocs"] == 6 and s["failed_allocs"] == 0, s
    assert res["trace"]["peak_live_bytes"] == 4 * MIB + MIB + 2 * MIB + 3 * MIB
    bad = subprocess.run([BENCH, "import", str(tmp_path / "missing.pickle"), "-o", "x.csv"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "gpool-bench import: " in bad.stderr
    assert "No such file" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_history_after_warm_up_uses_segments_and_warns_on_a_wrap(tmp_path, capsys):
    """History enabled after warm-up (a 600 MiB block live before it, only in `segments`) and a
    wrapped ring buffer (a free of a block never seen): both are live from time 0, the summary
    says so, host_traces are reported skipped, and its peak is the rows' peak."""
    base = 0x7D0000000000
    seg = {"device": 0, "address": base, "total_size": 1024 * MIB, "stream": 0,
           "blocks": [{"size": 600 * MIB, "state": "active_allocated"},
                      {"size": 24 * MIB, "state": "inactive"},
                      {"size": 8 * MIB, "state": "active_allocated"}]}
    trace = [
        ev("free_completed", base + 900 * MIB, 4 * MIB, 0, 1),  # the ring buffer lost its alloc
        ev("alloc", base + 700 * MIB, 16 * MIB, 0, 2),
        ev("free_requested", base + 700 * MIB, 16 * MIB, 0, 3),  # no completion recorded
        ev("alloc", base + 624 * MIB, 8 * MIB, 0, 4),  # the segment's 2nd block, seen: kept once
    ]
    path = tmp_path / "late.pickle"
    pickle.dump({"segments": [seg], "device_traces": [trace],
                 "host_traces": [[{"action": "alloc"}] * 3]}, open(path, "wb"))
    out = tmp_path / "late.csv"
    snapshot_import.convert(str(path), str(out))
    r = rows(out)
    assert (0, "allocate", base, 600 * MIB, 0) in r  # from segments
    assert [x for x in r if x[2] == base + 624 * MIB] == [(3000, "allocate", base + 624 * MIB,
                                                          8 * MIB, 0)]
    assert (0, "allocate", base + 900 * MIB, 4 * MIB, 0) in r  # before the wrap
    live = peak = 0
    for _, a, _, size, _ in r:
        live += size if a == "allocate" else -size if a == "free" else 0
        peak = max(peak, live)
    assert peak == 600 * MIB + 16 * MIB  # the 16 MiB block is freed at its request
    err = capsys.readouterr().err
    assert "1 blocks freed that the history never saw allocated" in err
    assert "ring buffer wrapped" in err
    assert "1 blocks live before the history began (segments)" in err
    assert "peak live %.1f MiB" % (peak / MIB) in err
    assert "host_traces: 3 entries skipped" in err


@pytest.mark.parametrize("device", [-1, 3, 5])
def test_a_device_the_snapshot_does_not_have_is_named_with_those_it_has(snap_path, tmp_path,
                                                                        device):
    """--device N for a device outside the snapshot's device_traces (negative included) says
    there is no device N and lists the snapshot's devices, from the API and the command."""
    out = tmp_path / "x.csv"
    with pytest.raises(snapshot_import.SnapshotError) as e:
        snapshot_import.convert(str(snap_path), str(out), device=device, quiet=True)
    msg = str(e.value)
    assert "no device %d" % device in msg and "devices 0, 1, 2" in msg, msg
    assert "no allocation events" not in msg
    run = subprocess.run([sys.executable, TOOL, str(snap_path), "-o", str(out),
                          "--device", str(device)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == ["snapshot_import.py: " + msg], run.stderr
    assert not out.exists()


def test_a_device_of_a_snapshot_with_one_device(tmp_path):
    path = tmp_path / "one.pickle"
    pickle.dump({"device_traces": [[ev("alloc", 0x1000, 512, 0, 1)]]}, open(path, "wb"))
    with pytest.raises(snapshot_import.SnapshotError, match=r"no device -1; the snapshot has "
                       r"only device 0$"):
        snapshot_import.convert(str(path), str(tmp_path / "x.csv"), device=-1, quiet=True)
