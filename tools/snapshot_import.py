#!/usr/bin/env python3
"""Convert a PyTorch memory snapshot into RMM replay CSV for gpool-bench (`gpool-bench import`).

    torch.cuda.memory._record_memory_history()      # in your program, before the work
    ...                                             # your model
    torch.cuda.memory._dump_snapshot("snap.pickle")
    gpool-bench import snap.pickle -o trace.csv     # or: python3 tools/snapshot_import.py ...
    gpool-bench compare trace.csv

The snapshot (torch.cuda.memory._snapshot(), pickled) holds `device_traces`: one list of trace
entries per device, each a dict with `action` ('alloc', 'free_requested', 'free_completed',
'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap', 'snapshot', 'oom'), `addr`,
`size`, `stream` and, in recent PyTorch versions, `time_us`. Only the block events matter here:
- 'alloc' becomes an `allocate` row;
- the free is placed at 'free_completed', when the memory really returns to the allocator (a
  block freed while other streams still use it completes later); a block whose completion is
  missing from the history (it was cut off) is freed at its 'free_requested' instead;
- 'oom' becomes an `allocate failure` row (the replay counts and skips those);
- segment events are the allocator's own driver calls, which the replay's strategies make
  themselves, and are left out.
Streams are kept (0 is the default stream). Memory live before the history began (history
enabled after warm-up, or a `max_entries` ring buffer that wrapped) is allocated at time 0 at
its address: every block the history frees without having seen it allocated, and every block of
the snapshot's `segments` still allocated at the end (`active_allocated`/`active_pending_free`;
its address is the block's own, or its segment's address plus the sizes before it) whose address
the history never allocated; the summary says how many and warns that the history wrapped or
began late. Blocks never freed stay live to the end. `host_traces` (pinned memory) are not
converted; the summary says how many entries were skipped. The summary's peak is the replay's:
computed on the rows as written.
One CSV per device that has events: `-o trace.csv` for one device, `trace-dev1.csv`, ... when
several have (or `--device N` for one of them). Time is nanoseconds from the first event.

Only the standard library is needed; the pickle is read with a loader that refuses to build
any object (a snapshot holds only dicts, lists, strings and numbers), so a hostile file cannot
run code.
"""

import argparse
import io
import json
import os
import pickle
import sys

HEADER = "Thread,Time,Action,Pointer,Size,Stream\n"


class SnapshotError(Exception):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused."""

    def find_class(self, module, name):
        raise SnapshotError(
            "the pickle refers to %s.%s: a PyTorch memory snapshot holds only plain data "
            "(dicts, lists, strings, numbers); refusing to load it" % (module, name))


def load_snapshot(path):
    """The snapshot dict from a pickle (torch.cuda.memory._dump_snapshot) or a JSON file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] in (b"{", b"["):
        try:
            snap = json.loads(data.decode())
        except ValueError as e:
            raise SnapshotError("%s: not valid JSON: %s" % (path, e)) from None
    else:
        try:
            snap = _PlainUnpickler(io.BytesIO(data)).load()
        except SnapshotError as e:
            raise SnapshotError("%s: %s" % (path, e)) from None
        except Exception as e:
            raise SnapshotError("%s: not a pickled memory snapshot: %s" % (path, e)) from None
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise SnapshotError(
            "%s: no 'device_traces' in it: record the history first with "
            "torch.cuda.memory._record_memory_history() before the work, then "
            "torch.cuda.memory._dump_snapshot()" % path)
    if not isinstance(snap["device_traces"], list):
        raise SnapshotError("%s: 'device_traces' is not a list (one per device)" % path)
    return snap


class DeviceTrace:
    """The replay rows of one device and what the conversion met on the way."""

    def __init__(self, device):
        self.device = device
        self.rows = []  # (time_ns, action, addr, size, stream)
        self.allocs = self.frees = self.failures = 0
        self.dropped_frees = 0  # (kept for callers; prehistory blocks are allocated at 0 now)
        self.prehistory = 0  # blocks freed in the history but allocated before it: at time 0
        self.from_segments = 0  # blocks live at the end from `segments`, allocated at time 0
        self.requested_frees = 0  # frees placed at free_requested (no free_completed seen)
        self.unfreed = 0
        self.streams = set()
        self.live = self.peak = 0


def _int(entry, key, where, default=None):
    v = entry.get(key, default)
    if v is None or isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SnapshotError("%s: entry without a valid %r: %r" % (where, key, entry.get(key)))
    return v


def _segment_blocks(segments, device):
    """(addr, size, stream) of the blocks `segments` shows allocated on ``device``."""
    out = []
    for seg in segments or []:
        if not isinstance(seg, dict) or seg.get("device", 0) != device:
            continue
        addr = seg.get("address")
        if not isinstance(addr, int):
            continue
        stream = seg.get("stream", 0) if isinstance(seg.get("stream", 0), int) else 0
        for b in seg.get("blocks") or []:
            if not isinstance(b, dict) or not isinstance(b.get("size"), int):
                continue
            baddr = b.get("address", addr)
            if b.get("state") in ("active_allocated", "active_pending_free") and b["size"]:
                out.append((baddr, b["size"], stream))
            addr = baddr + b["size"]
    return out


def convert_device(device, entries, name="snapshot", segments=None):
    """Replay rows for one device's trace entries (in recorded order); ``segments`` (the
    snapshot's) adds the blocks live before the history began and still live at its end."""
    out = DeviceTrace(device)
    seen = set()  # addresses the history allocates
    for e in entries:
        if isinstance(e, dict) and e.get("action") == "alloc" and isinstance(e.get("addr"), int):
            seen.add(e["addr"])
    PRE = -1  # sorts before every recorded time; rows are rebased on the first one
    live = {}  # addr -> (size, stream)
    requested = {}  # addr -> (time, stream) of a free_requested whose completion is pending
    for i, e in enumerate(entries):
        where = "%s: device %d, trace entry %d" % (name, device, i)
        if not isinstance(e, dict) or "action" not in e:
            raise SnapshotError("%s: not a trace entry (a dict with 'action')" % where)
        action = e["action"]
        if action not in ("alloc", "free_requested", "free_completed", "oom"):
            continue  # segment_* and snapshot events: the allocator's own business
        us = e.get("time_us")
        t = int(us * 1000) if isinstance(us, (int, float)) and not isinstance(us, bool) else i
        stream = _int(e, "stream", where, 0)
        if action == "oom":
            out.rows.append((t, "allocate failure", 0, _int(e, "size", where), stream))
            out.failures += 1
            continue
        addr = _int(e, "addr", where)
        size = _int(e, "size", where)
        if action == "alloc":
            if addr in live:
                # the previous block's completion is missing: free it when it was requested,
                # or at the latest now, before its address is handed out again
                psize, pstream = live.pop(addr)
                rt, rstream = requested.pop(addr, (t, pstream))
                out.rows.append((rt, "free", addr, psize, rstream))
                out.frees += 1
                out.requested_frees += 1
                out.live -= psize
            if size == 0:
                continue
            live[addr] = (size, stream)
            out.rows.append((t, "allocate", addr, size, stream))
            out.allocs += 1
            out.streams.add(stream)
            out.live += size
            out.peak = max(out.peak, out.live)
        elif action == "free_requested":
            if addr in live:
                requested[addr] = (t, stream)
        else:  # free_completed: the memory is back in the allocator now
            if addr not in live:
                if addr in seen:
                    continue  # a second completion of a block freed already
                # allocated before the history began (or before the ring buffer wrapped)
                out.rows.append((PRE, "allocate", addr, size, stream))
                out.allocs += 1
                out.prehistory += 1
                out.streams.add(stream)
                live[addr] = (size, stream)
                seen.add(addr)
            bsize, bstream = live.pop(addr)
            requested.pop(addr, None)
            out.rows.append((t, "free", addr, bsize, bstream))
            out.frees += 1
            out.live -= bsize
    # requested but never completed within the history: the block was freed by the program
    for e in entries:  # a request for a block the history never allocated: prehistory too
        if (isinstance(e, dict) and e.get("action") == "free_requested" and
                isinstance(e.get("addr"), int) and e["addr"] not in seen and
                isinstance(e.get("size"), int)):
            addr, size, stream = e["addr"], e["size"], e.get("stream", 0) or 0
            us = e.get("time_us")
            t = int(us * 1000) if isinstance(us, (int, float)) and not isinstance(us, bool) else 0
            out.rows.append((PRE, "allocate", addr, size, stream))
            out.rows.append((t, "free", addr, size, stream))
            out.allocs += 1
            out.frees += 1
            out.prehistory += 1
            out.requested_frees += 1
            seen.add(addr)
    for addr, size, stream in _segment_blocks(segments, device):
        if addr in seen or addr in live:
            continue
        out.rows.append((PRE, "allocate", addr, size, stream))
        out.allocs += 1
        out.from_segments += 1
        out.streams.add(stream)
        live[addr] = (size, stream)
        seen.add(addr)
    for addr, (rt, rstream) in requested.items():
        if addr in live:
            bsize, _ = live.pop(addr)
            out.rows.append((rt, "free", addr, bsize, rstream))
            out.frees += 1
            out.requested_frees += 1
    out.unfreed = len(live)
    # rows placed back at their request time may be out of order: stable sort by time, then
    # times from the first row
    out.rows.sort(key=lambda r: r[0])
    recorded = [r[0] for r in out.rows if r[0] != PRE]
    t0 = recorded[0] if recorded else 0
    out.rows = [(0 if r[0] == PRE else r[0] - t0,) + r[1:] for r in out.rows]
    # the peak as the replay sees it: on the rows as written
    cur = peak = 0
    for _, action, _, size, _ in out.rows:
        if action == "allocate":
            cur += size
            peak = max(peak, cur)
        elif action == "free":
            cur -= size
    out.live, out.peak = cur, peak
    return out


def write_csv(trace, path):
    with open(path, "w") as f:
        f.write(HEADER)
        for t, action, addr, size, stream in trace.rows:
            f.write("0,%d,%s,%#x,%d,%#x\n" % (t, action, addr, size, stream))


def output_paths(out, devices):
    if len(devices) == 1:
        return {devices[0]: out}
    root, ext = os.path.splitext(out)
    return {d: "%s-dev%d%s" % (root, d, ext or ".csv") for d in devices}


def convert(snapshot_path, out, device=None, quiet=False):
    """Write the CSV file(s); returns {device: path}."""
    snap = load_snapshot(snapshot_path)
    name = os.path.basename(snapshot_path)
    ndev = len(snap["device_traces"])
    if device is not None and not 0 <= device < ndev:
        raise SnapshotError("%s: no device %d; the snapshot has %s" % (
            name, device, "no devices" if ndev == 0 else "only device 0" if ndev == 1 else
            "devices " + ", ".join(str(d) for d in range(ndev))))
    traces = {}
    for d, entries in enumerate(snap["device_traces"]):
        if device is not None and d != device:
            continue
        if not isinstance(entries, list):
            raise SnapshotError("%s: device_traces[%d] is not a list" % (name, d))
        tr = convert_device(d, entries, name, snap.get("segments"))
        if tr.rows:
            traces[d] = tr
    if not traces:
        raise SnapshotError(
            "%s: no allocation events in its history%s: was "
            "torch.cuda.memory._record_memory_history() called before the work?" %
            (name, "" if device is None else " for device %d" % device))
    host = snap.get("host_traces")
    if host and not quiet:
        n = sum(len(h) for h in host if isinstance(h, list)) if isinstance(host, list) else 0
        print("%s: host_traces: %d entries skipped (pinned memory is not converted)" %
              (name, n), file=sys.stderr)
    paths = output_paths(out, sorted(traces))
    for d, path in paths.items():
        tr = traces[d]
        write_csv(tr, path)
        if not quiet:
            notes = []
            if tr.requested_frees:
                notes.append("%d freed at free_requested (no free_completed recorded)" %
                             tr.requested_frees)
            if tr.prehistory:
                notes.append("warning: %d blocks freed that the history never saw allocated "
                             "(it began after them, or its max_entries ring buffer wrapped): "
                             "allocated at time 0" % tr.prehistory)
            if tr.from_segments:
                notes.append("%d blocks live before the history began (segments) allocated "
                             "at time 0" % tr.from_segments)
            if tr.unfreed:
                notes.append("%d blocks still live at the end" % tr.unfreed)
            if tr.failures:
                notes.append("%d out-of-memory events kept as 'allocate failure'" % tr.failures)
            print("%s: device %d: %d allocations, %d frees, %d streams, peak live %.1f MiB%s" %
                  (path, d, tr.allocs, tr.frees, len(tr.streams), tr.peak / 2**20,
                   "; " + "; ".join(notes) if notes else ""), file=sys.stderr)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=os.environ.get("GPOOL_IMPORT_PROG", "snapshot_import.py"),
        description="Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) "
        "into RMM replay CSV for gpool-bench, one file per device.")
    ap.add_argument("snapshot", help="the .pickle from _dump_snapshot (or the same as JSON)")
    ap.add_argument("-o", "--output", required=True,
                    help="the CSV to write; with several devices, NAME-devN.csv each")
    ap.add_argument("--device", type=int, help="convert only this device's history")
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    args = ap.parse_args(argv)
    try:
        convert(args.snapshot, args.output, args.device, args.quiet)
    except (SnapshotError, OSError) as e:
        print("%s: %s" % (ap.prog, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
