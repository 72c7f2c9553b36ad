"""gpool.ipc from an outsider's side (docs/ipc.md): the same handle imported twice by one
process is one counted mapping, closes past the opens raise, and a handle may come as any
bytes-like object of 64 bytes (a memoryview of shared memory, say). Two real processes on the
simulated driver."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import gpool
import gpool.ipc

HERE = os.path.dirname(os.path.abspath(__file__))


def _ipc_pool_or_skip():
    try:
        return gpool.ipc.ipc_pool(device=0)
    except gpool.Error as e:
        if e.status == gpool.ERR_UNSUPPORTED:
            pytest.skip("the driver cannot export memory: %s" % e.message)
        raise


IMPORTER = textwrap.dedent("""
    import ctypes, sys
    import gpool
    handle = bytes.fromhex(sys.argv[1]); n = int(sys.argv[2])
    want = bytes((i * 5 + 1) % 253 for i in range(n))
    with gpool.Pool(device=0) as pool:
        a = pool.import_(memoryview(handle))
        b = pool.import_(bytearray(handle))
        print("same" if a == b else "two mappings")
        pool.close_imported(a)
        print("read" if ctypes.string_at(b, n) == want else "gone after one close")
        pool.close_imported(b)
        try:
            pool.close_imported(b)
            print("third close worked")
        except gpool.Error as e:
            print("refused" if e.status == gpool.ERR_INVALID_POINTER else "status %d" % e.status)
""")


def test_same_handle_twice_is_one_counted_mapping():
    pool = _ipc_pool_or_skip()
    free_later = []
    try:
        n = (1 << 20) + 17
        p = pool.alloc(n)
        free_later.append(p)
        data = bytes((i * 5 + 1) % 253 for i in range(n))
        ctypes.memmove(p, data, n)
        h = pool.export(p)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.dirname(HERE)
        out = subprocess.run([sys.executable, "-c", IMPORTER, h.hex(), str(n)], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["same", "read", "refused"], out.stdout + out.stderr
    finally:
        for q in free_later:
            pool.free(q)
        pool.close()
