"""gpool's pools in PyTorch's memory-snapshot format (torch.cuda.memory._snapshot()), so that
torch.cuda._memory_viz and the memory_viz web page draw them.

The layout follows the schema torch/cuda/memory.py documents for _snapshot() and the names
torch/csrc/cuda/Module.cpp writes: {"segments": [Segment], "device_traces": [[TraceEntry]]}.
A segment is a run of gpool address space with memory behind it (gpool_dump_json's ranges up
to the next never-backed or given-back range), so the segments add up to gpool's reserved
bytes; a slab of small blocks is a "small" segment of its own. Blocks tile their segment:
  in_use            "active_allocated"   (requested_size: the bytes asked for)
  in_use, but freed by PyTorch and waiting in the hooks' free batch or held as graph memory,
  and pending       "active_pending_free" (freed; queued work may still use it)
  cached            "inactive"
A slab shows its live slots as one active block at its start and the rest inactive (gpool keeps
no per-slot addresses in the dump). Frames are empty: gpool records no stack traces.
"""

import csv
import os

__all__ = ["from_dump", "trace_entries", "trace_path"]


def _block(addr, size, state, requested=None):
    return {"address": addr, "size": size, "requested_size": size if requested is None else requested,
            "state": state, "frames": []}


def _segment(device, blocks, stream, kind):
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    pending = sum(b["size"] for b in blocks if b["state"] == "active_pending_free")
    return {
        "device": device,
        "address": blocks[0]["address"],
        "total_size": sum(b["size"] for b in blocks),
        "allocated_size": alloc,
        "active_size": alloc + pending,
        "requested_size": sum(b["requested_size"] for b in blocks
                              if b["state"] == "active_allocated"),
        "stream": stream,
        "segment_type": kind,
        "segment_pool_id": (0, 0),
        "is_expandable": True,  # VMM: gpool maps pages into reserved ranges as they are needed
        "frames": [],
        "blocks": blocks,
    }


def _slab(device, r):
    live = min(r.get("live_slots", 0) * r.get("slot_size", 0), r["size"])
    blocks = []
    if live:
        blocks.append(_block(r["addr"], live, "active_allocated"))
    if r["size"] > live:
        blocks.append(_block(r["addr"] + live, r["size"] - live, "inactive"))
    return _segment(device, blocks, 0, "small")


def from_dump(dump, freed=()):
    """The segment list of one gpool_dump_json dict; ``freed``: addresses of in-use blocks that
    PyTorch already freed (gpool_torch_get_freed)."""
    device = dump.get("device", 0)
    freed = set(freed)
    out = []
    for region in dump.get("arenas", {}).get("device", []):
        run, stream = [], None

        def close():
            nonlocal run, stream
            if run:
                out.append(_segment(device, run, stream or 0, "large"))
            run, stream = [], None

        for r in region.get("ranges", []):
            st = r["state"]
            if st in ("reserved", "alias"):  # no memory of its own (alias: a span's pages)
                close()
            elif st == "slab":
                close()
                out.append(_slab(device, r))
            elif st == "in_use":
                if r["addr"] in freed:
                    run.append(_block(r["addr"], r["size"], "active_pending_free",
                                      r.get("requested", r["size"])))
                else:
                    run.append(_block(r["addr"], r["size"], "active_allocated",
                                      r.get("requested", r["size"])))
                if stream is None:
                    stream = r.get("stream", 0)
            elif st == "pending":
                run.append(_block(r["addr"], r["size"], "active_pending_free"))
            else:  # cached, or a state of a later version: free memory
                run.append(_block(r["addr"], r["size"], "inactive"))
        close()
    return out


def trace_path(environ=None):
    """The trace file gpool writes (GPOOL_CONF trace=, else GPOOL_TRACE; %p: this process), or
    None when tracing is off."""
    env = os.environ if environ is None else environ
    path = None
    for item in (env.get("GPOOL_CONF") or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "trace" and value:
            path = value.strip()
    path = path or env.get("GPOOL_TRACE") or None
    return path.replace("%p", str(os.getpid())) if path else None


def trace_entries(path, regions):
    """The device rows of gpool's trace at ``path`` whose address lies in ``regions`` ((base,
    size) pairs: one device's address space) as PyTorch TraceEntry dicts. A free row is the
    moment the block became reusable: it gives "free_requested" and "free_completed"."""
    out = []
    live = {}
    if not path or not os.path.exists(path):
        return out

    def mine(addr):
        return any(base <= addr < base + size for base, size in regions)

    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                action = row["Action"]
                addr = int(row["Pointer"], 16)
                size = int(row["Size"])
                stream = int(row.get("Stream") or "0", 16)
                t_us = int(row.get("Time") or 0) // 1000
            except (KeyError, ValueError, TypeError):
                continue
            base = {"addr": addr, "size": size, "stream": stream, "frames": [], "time_us": t_us}
            if action == "allocate":
                if (row.get("Kind") or "device") != "device" or not mine(addr):
                    continue
                live[addr] = size
                out.append(dict(base, action="alloc"))
            elif action == "free" and addr in live:
                base["size"] = live.pop(addr)
                out.append(dict(base, action="free_requested"))
                out.append(dict(base, action="free_completed"))
    return out


