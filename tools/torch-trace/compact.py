"""Shrink a recorded trace for the repository: pointers renumbered (a freed number is reused,
as addresses are), times rounded down to the millisecond, thread ids dropped. The order of
allocations and frees and every size stay as recorded. Usage: compact.py IN.csv OUT.csv"""
import csv
import sys

src, dst = sys.argv[1], sys.argv[2]
spare, ids, next_id = [], {}, 1
with open(src, newline="") as f, open(dst, "w") as out:
    rows = csv.reader(f)
    out.write(",".join(next(rows)) + "\n")
    for _thread, ns, action, ptr, size, stream in rows:
        if action == "allocate":
            if spare:
                ids[ptr] = spare.pop()
            else:
                ids[ptr], next_id = next_id, next_id + 1
            n = ids[ptr]
        else:
            n = ids.pop(ptr)
            spare.append(n)
        out.write(f"0,{int(ns) // 1000000 * 1000000},{action},0x{n:x},{size},{stream}\n")
