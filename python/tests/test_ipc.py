"""gpool.ipc: Pool.export / Pool.import_ / Pool.close_imported between two real processes on the
simulated driver (docs/ipc.md)."""
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
            pytest.skip("the driver cannot export memory (the simulator's shareable handles: "
                        "issue 28, branch ipcsim): %s" % e.message)
        raise


def test_export_needs_an_ipc_pool():
    with gpool.Pool(device=0) as pool:
        p = pool.alloc(1 << 20)
        with pytest.raises(gpool.Error) as e:
            pool.export(p)
        assert e.value.status == gpool.ERR_UNSUPPORTED
        assert "ipc" in e.value.message
        pool.free(p)


def test_import_checks_the_handle():
    with gpool.Pool(device=0) as pool:
        with pytest.raises(gpool.Error) as e:
            pool.import_(b"short")
        assert e.value.status == gpool.ERR_INVALID_ARG
        with pytest.raises(gpool.Error) as e:
            pool.import_(bytes(64))
        assert e.value.status == gpool.ERR_INVALID_ARG
        assert "not a gpool IPC handle" in e.value.message
        with pytest.raises(gpool.Error) as e:
            pool.close_imported(0x1000)
        assert e.value.status == gpool.ERR_INVALID_POINTER


def test_torch_sharing_names_the_drop_in():
    with pytest.raises(gpool.Error) as e:
        gpool.ipc.torch_sharing()
    assert "LD_PRELOAD=libgpool_preload.so" in e.value.message
    assert "ipc=1" in e.value.message


IMPORTER = textwrap.dedent("""
    import ctypes, sys
    import gpool
    handle = bytes.fromhex(sys.argv[1]); n = int(sys.argv[2])
    with gpool.Pool(device=0) as pool:
        q = pool.import_(handle)
        data = ctypes.string_at(q, n)  # the simulator's device memory is host memory
        ok = data == bytes((i * 7 + 3) % 251 for i in range(n))
        pool.close_imported(q)
    print("ok" if ok else "different")
""")


def test_another_process_reads_an_exported_block():
    pool = _ipc_pool_or_skip()
    try:
        n = 3 * (1 << 20) + 999
        p = pool.alloc(n)
        ctypes_memmove(p, bytes((i * 7 + 3) % 251 for i in range(n)))
        h = pool.export(p)
        assert len(h) == 64
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.dirname(HERE)
        out = subprocess.run([sys.executable, "-c", IMPORTER, h.hex(), str(n)], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"
        pool.free(p)
    finally:
        pool.close()


def ctypes_memmove(addr, data):
    import ctypes
    ctypes.memmove(addr, data, len(data))
