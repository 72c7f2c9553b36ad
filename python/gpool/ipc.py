"""Sharing device blocks between processes (gpool_export_block / gpool_import_block,
docs/ipc.md).

    import gpool, gpool.ipc
    pool = gpool.ipc.ipc_pool(device=0)          # a Pool whose pages are exportable (ipc=1)
    p = pool.alloc(1 << 20)
    h = pool.export(p)                            # 64 bytes: send them to another process
    # ... in the other process (any gpool.Pool on the same device):
    q = other_pool.import_(h)                     # an int address of the same memory
    other_pool.close_imported(q)

The handle names no file descriptor: the importer fetches them from the exporting process
over a Unix-domain socket (SCM_RIGHTS) that a helper thread of the exporting pool serves, so
both processes must run as the same user. A block the owner frees while another process has
it open stays allocated until the last importer closed it (or died).

PyTorch: with gpool.torch.enable(), torch.multiprocessing's CUDA tensor sharing calls
cudaIpcGetMemHandle inside libtorch, which gpool's pluggable allocator cannot serve (the hook
has no IPC entry); torch_sharing() raises the error that says so. Run such programs under the
drop-in instead (gpool-run, or LD_PRELOAD=libgpool_preload.so, with GPOOL_CONF=ipc=1): it
serves cudaIpcGetMemHandle / cudaIpcOpenMemHandle on gpool's blocks.
"""

import ctypes
import os

from . import _lib

HANDLE_SIZE = 64
MAGIC = 0x48495047


if any(f[0] == "ipc" for f in _lib.gpool_config._fields_):
    _IpcConfig = _lib.gpool_config
else:  # a gpool/_lib.py without the 0.3.0 fields
    class _IpcConfig(_lib._Sized):
        """gpool_config with the fields added since 0.2.1 (include/gpool.h)."""
        _fields_ = list(_lib.gpool_config._fields_) + [("reserved1", ctypes.c_int),
                                                        ("ipc", ctypes.c_int)]


_declared = False


def _l():
    global _declared
    lib = _lib.load()
    if not _declared:
        P, S = ctypes.c_void_p, ctypes.c_int
        for name, args in (
            ("gpool_export_block", [P, P, ctypes.c_char_p]),
            ("gpool_import_block", [P, ctypes.c_char_p, ctypes.POINTER(P)]),
            ("gpool_close_imported", [P, P]),
        ):
            fn = getattr(lib, name, None)
            if fn is None:
                raise _error()(6, "this libgpool has no %s (older than 0.3.0)" % name, name)
            fn.restype = S
            fn.argtypes = args
        _declared = True
    return lib


def _error():
    from . import Error
    return Error


def _check(status, call):
    if status != 0:
        raise _error()(status, _lib.load().gpool_last_error().decode(errors="replace"), call)


def ipc_pool(device=0, **config):
    """A gpool.Pool created with ipc=1 (its device pages exportable), the defaults, $GPOOL_CONF
    and ``config`` (GPOOL_CONF keys) applied as gpool.Pool does."""
    from . import Pool, _conf_string
    lib = _l()
    cfg = _IpcConfig()
    # fresh function objects (lib[name]): gpool/_lib.py's declarations stay as they are
    default, parse, create = lib["gpool_config_default"], lib["gpool_config_parse"], lib["gpool_create"]
    for fn, args in ((default, [ctypes.c_void_p]), (parse, [ctypes.c_void_p, ctypes.c_char_p]),
                     (create, [ctypes.c_void_p, ctypes.c_void_p])):
        fn.restype, fn.argtypes = ctypes.c_int, args
    _check(default(ctypes.addressof(cfg)), "gpool_config_default")
    if os.environ.get("GPOOL_CONF"):
        _check(parse(ctypes.addressof(cfg), os.environ["GPOOL_CONF"].encode()),
               "gpool_config_parse (GPOOL_CONF)")
    if config:
        _check(parse(ctypes.addressof(cfg), _conf_string(config).encode()), "gpool_config_parse")
    cfg.device = int(device)
    cfg.ipc = 1
    handle = ctypes.c_void_p()
    _check(create(ctypes.addressof(cfg), ctypes.addressof(handle)), "gpool_create")
    pool = Pool._borrow(handle.value, cfg.device)
    pool._owned = True
    return pool


def export(pool, ptr):
    """Pool.export(ptr): the 64-byte handle (bytes) of the live device block holding ptr."""
    lib = _l()
    buf = ctypes.create_string_buffer(HANDLE_SIZE)
    _check(lib.gpool_export_block(pool._h(), ctypes.c_void_p(int(ptr)), buf), "gpool_export_block")
    return buf.raw


def import_(pool, handle):
    """Pool.import_(handle): map a block another process exported; returns its address (int).
    handle: Pool.export's 64 bytes, as any bytes-like object (bytes, bytearray, a memoryview
    of shared memory). Importing a handle this pool has open returns the same address and
    counts one more open: close_imported once per import_."""
    try:
        raw = bytes(memoryview(handle).cast("B"))
    except (TypeError, ValueError):
        raw = None
    if raw is None or len(raw) != HANDLE_SIZE:
        raise _error()(1, "an IPC handle is %d bytes (Pool.export's answer)" % HANDLE_SIZE,
                       "gpool_import_block")
    handle = raw
    lib = _l()
    out = ctypes.c_void_p()
    _check(lib.gpool_import_block(pool._h(), bytes(handle), ctypes.byref(out)),
           "gpool_import_block")
    return out.value


def close_imported(pool, ptr):
    """Pool.close_imported(ptr): unmap an import and tell its exporter."""
    lib = _l()
    _check(lib.gpool_close_imported(pool._h(), ctypes.c_void_p(int(ptr))), "gpool_close_imported")


def torch_sharing():
    """What torch.multiprocessing CUDA tensor sharing gets under gpool.torch.enable(): an
    error naming the drop-in, which serves it."""
    raise _error()(
        6,
        "torch.multiprocessing CUDA tensor sharing is not served by gpool.torch: PyTorch's "
        "pluggable allocator has no IPC hook (libtorch calls cudaIpcGetMemHandle itself). Run "
        "the program under gpool's drop-in instead (gpool-run, or "
        "LD_PRELOAD=libgpool_preload.so) with GPOOL_CONF=ipc=1",
        "gpool.torch")


def _attach(pool_class):
    pool_class.export = export
    pool_class.import_ = import_
    pool_class.close_imported = close_imported
