"""gpool — a caching memory-pool allocator for NVIDIA GPUs, from Python.

ctypes over libgpool.so (standard library only). ``gpool.Pool`` wraps one pool;
``gpool.torch.enable()`` makes gpool PyTorch's CUDA allocator; ``gpool.cupy.allocator`` is a
CuPy allocator.

    import gpool
    with gpool.Pool(device=0, release_threshold="64M") as pool:
        p = pool.alloc(1 << 20)                      # device memory, an int address
        info = pool.block_info(p)                    # {'kind': 'device', 'size': ...}
        pool.free(p)
        print(pool.stats()["total"]["peak_in_use_bytes"])

Every failure raises gpool.Error, carrying the status code and gpool_last_error()'s message.
Arguments are checked before the library sees them: a value of the wrong type raises
gpool.ArgumentTypeError (a gpool.Error and a TypeError), one out of range (a size outside
0..2**64-1, an unknown kind) gpool.ArgumentValueError (a gpool.Error and a ValueError).
"""

import ctypes
import json
import os

from . import _args, _lib
from ._lib import FLAGS, KIND_NAMES, KINDS, USAGE_NAMES, USAGES

__all__ = ["Pool", "Error", "ArgumentTypeError", "ArgumentValueError", "version", "library_path", "KINDS", "USAGES", "FLAGS"]
__version__ = "0.3.0"


class Error(Exception):
    """A gpool call failed.

    Attributes: ``status`` (the gpool_status code, an int), ``status_name``
    ("GPOOL_ERR_OUT_OF_MEMORY", ...), ``reason`` (gpool_strerror: "out of memory"),
    ``message`` (gpool_last_error(): what exactly went wrong) and ``call`` (the C function)."""

    def __init__(self, status, message, call=""):
        self.status = int(status)
        self.status_name = _lib.STATUS_NAMES.get(self.status, "status %d" % self.status)
        lib = _lib.load()
        self.reason = lib.gpool_strerror(self.status).decode()
        call_name = call.split(" ")[0]
        if call_name and message.startswith(call_name + ": "):
            message = message[len(call_name) + 2:]  # gpool_last_error() names the call too
        self.message = message
        self.call = call
        text = "%s: %s" % (call, self.reason) if call else self.reason
        if message:
            text += ": " + message
        super().__init__(text)


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type (a str size, a float stream): GPOOL_ERR_INVALID_ARG,
    raised before the library is called."""

    def __init__(self, message, call=""):
        Error.__init__(self, 1, message, call)


class ArgumentValueError(Error, ValueError):
    """An argument out of range (a size outside 0..2**64-1, an unknown kind or usage):
    GPOOL_ERR_INVALID_ARG, raised before the library is called."""

    def __init__(self, message, call=""):
        Error.__init__(self, 1, message, call)


# status codes, as gpool.OK, gpool.ERR_OUT_OF_MEMORY, ...
for _code, _name in _lib.STATUS_NAMES.items():
    globals()[_name[len("GPOOL_"):]] = _code


def _check(status, call):
    if status != 0:
        lib = _lib.load()
        raise Error(status, lib.gpool_last_error().decode(errors="replace"), call)


def version():
    """The version of the libgpool.so in use ("MAJOR.MINOR.PATCH")."""
    return _lib.load().gpool_version().decode()


def library_path():
    """The libgpool.so file in use."""
    return _lib.library_path()


def _conf_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _conf_string(config):
    for key, value in config.items():
        text = _conf_value(value)
        if "," in text or "=" in key:
            raise Error(8, "config %s=%r: values cannot contain ','" % (key, value), "Pool")
    return ",".join("%s=%s" % (k, _conf_value(v)) for k, v in config.items())


def make_config(device=0, env=True, **config):
    """A gpool_config: the defaults, then $GPOOL_CONF (when env is true), then ``config``
    (GPOOL_CONF keys: release_threshold, tcache_bytes, small_max, budget_device,
    budget_pinned, budget_mapped, va_reserve, verbose, trace, peer_access, stream_reuse; sizes
    may be ints or "64M"),
    then ``device``. Raises Error (GPOOL_ERR_CONFIG) naming a bad key or value."""
    lib = _lib.load()
    cfg = _lib.gpool_config()
    _check(lib.gpool_config_default(ctypes.byref(cfg)), "gpool_config_default")
    if env and os.environ.get("GPOOL_CONF"):
        _check(lib.gpool_config_parse(ctypes.byref(cfg), os.environ["GPOOL_CONF"].encode()),
               "gpool_config_parse (GPOOL_CONF)")
    if config:
        _check(lib.gpool_config_parse(ctypes.byref(cfg), _conf_string(config).encode()),
               "gpool_config_parse")
    if device is not None:
        cfg.device = _args.device(device, "gpool_create")
    return cfg


def _enum(value, table, what, call="gpool_alloc"):
    return _args.enum(value, table, what, call)


def _stream(stream, call="gpool_alloc_async"):
    """A stream argument: None (the pool's default stream), an int handle, a ctypes.c_void_p,
    or any object with a ``ptr`` (CuPy), ``cuda_stream`` (PyTorch) or ``handle`` attribute."""
    return _args.stream(stream, call)


def _kind_stats(k):
    return {name: int(getattr(k, name)) for name, _ in _lib.gpool_kind_stats._fields_}


def stats_dict(raw):
    """A gpool_stats as a dict: per-kind counters under "total", "device", "pinned" and
    "mapped", driver calls by name, and the other counters."""
    lib = _lib.load()
    out = {"total": _kind_stats(raw.kind[0])}
    for kind in (1, 2, 3):
        out[KIND_NAMES[kind]] = _kind_stats(raw.kind[kind])
    out["driver_calls"] = {
        lib.gpool_driver_call_name(i).decode(): int(raw.driver_calls[i])
        for i in range(_lib.GPOOL_DRV_COUNT)
    }
    for name, _ in _lib.gpool_stats._fields_[3:]:  # after struct_size, kind, driver_calls
        out[name] = int(getattr(raw, name))
    return out


class Pool:
    """A gpool pool on one device: ``Pool(device=0, **config)``.

    ``config`` takes the GPOOL_CONF keys (release_threshold, tcache_bytes, small_max,
    budget_device, budget_pinned, budget_mapped, va_reserve, verbose, trace, peer_access,
    stream_reuse) and is applied
    over the defaults and $GPOOL_CONF. Addresses are ints. Use it as a context manager or call
    close(); blocks still live then are freed and reported (Error GPOOL_ERR_LIVE_BLOCKS)."""

    def __init__(self, device=0, **config):
        lib = _lib.load()
        self._lib = lib
        self._handle = None
        self._owned = True
        cfg = make_config(device=device, **config)
        handle = ctypes.c_void_p()
        _check(lib.gpool_create(ctypes.byref(cfg), ctypes.byref(handle)), "gpool_create")
        self._handle = handle
        self.device = cfg.device

    @classmethod
    def _borrow(cls, handle, device):
        """A Pool object over a pool owned elsewhere (gpool.torch's); close() leaves it."""
        self = cls.__new__(cls)
        self._lib = _lib.load()
        self._handle = ctypes.c_void_p(handle)
        self._owned = False
        self.device = device
        return self

    @property
    def handle(self):
        """The gpool_t * as an int (for other ctypes code)."""
        return self._h().value

    def _h(self):
        if self._handle is None:
            raise Error(1, "the pool is closed", "Pool")
        return self._handle

    def alloc(self, size, kind="device", usage="default", stream=None, alignment=0,
              page_size=0, flags=0):
        """Allocate ``size`` bytes; returns the address (an int; None for size 0).

        kind: "device", "pinned", "mapped" or "auto" (the policy picks from ``usage``:
        "default", "gpu_only", "upload", "readback", "staging", "multi_gpu",
        "large_dataset"); stream: None (the pool's default stream) or a CUstream handle;
        flags: an int or an iterable of "zero", "allow_fallback", "stream_wait",
            "no_stream_wait"."""
        call = "gpool_alloc" if stream is None else "gpool_alloc_async"
        size = _args.size(size, call)
        params = _lib.gpool_alloc_params(
            kind=_args.enum(kind, KINDS, "kind", call),
            usage=_args.enum(usage, USAGES, "usage", call),
            alignment=_args.size(alignment, call, "alignment"),
            page_size=_args.size(page_size, call, "page_size"),
            flags=_args.flags(flags, FLAGS, call),
        )
        out = ctypes.c_void_p()
        s = _stream(stream, call)
        if s is None:
            st = self._lib.gpool_alloc(self._h(), size, ctypes.byref(params), ctypes.byref(out))
            _check(st, "gpool_alloc")
        else:
            st = self._lib.gpool_alloc_async(self._h(), size, ctypes.byref(params), s,
                                             ctypes.byref(out))
            _check(st, "gpool_alloc_async")
        return out.value

    def free(self, ptr, stream=None):
        """Free a block: on the pool's default stream, or once ``stream``'s queued work is
        done (gpool_free_async). None is a no-op."""
        call = "gpool_free" if stream is None else "gpool_free_async"
        ptr = _args.address(ptr, call)
        s = _stream(stream, call)
        if s is None:
            _check(self._lib.gpool_free(self._h(), ptr), "gpool_free")
        else:
            _check(self._lib.gpool_free_async(self._h(), ptr, s), "gpool_free_async")

    def record_stream(self, ptr, stream):
        """The block is also used on ``stream``: its free waits for that stream's work too."""
        ptr = _args.address(ptr, "gpool_record_stream")
        s = _stream(stream, "gpool_record_stream")
        _check(self._lib.gpool_record_stream(self._h(), ptr, s),
               "gpool_record_stream")

    def trim(self, keep_bytes=0):
        """Give cached memory back to the driver until at most keep_bytes stay cached."""
        keep_bytes = _args.size(keep_bytes, "gpool_trim", "keep_bytes")
        _check(self._lib.gpool_trim(self._h(), keep_bytes), "gpool_trim")

    def stats(self):
        """The pool's counters as a dict (see stats_dict)."""
        raw = _lib.gpool_stats()
        _check(self._lib.gpool_get_stats(self._h(), ctypes.byref(raw)), "gpool_get_stats")
        return stats_dict(raw)

    def block_info(self, ptr):
        """What gpool knows about the live block containing ``ptr``, as a dict; kind and
        usage by name, stream as an int (0: the legacy stream), host_ptr None for device
        blocks."""
        ptr = _args.address(ptr, "gpool_get_block_desc", none_ok=False)
        d = _lib.gpool_block_desc()
        _check(self._lib.gpool_get_block_desc(self._h(), ptr, ctypes.byref(d)),
               "gpool_get_block_desc")
        return {
            "kind": KIND_NAMES.get(d.kind, d.kind),
            "usage": USAGE_NAMES.get(d.usage, d.usage),
            "requested_size": d.requested_size,
            "size": d.size,
            "page_size": d.page_size,
            "device_ptr": d.device_ptr,
            "host_ptr": d.host_ptr,
            "stream": d.stream or 0,
            "device": d.device,
            "fell_back": bool(d.fell_back),
        }

    def mem_get_info(self):
        """(free, total) device bytes; free counts the pool's cached bytes."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        _check(self._lib.gpool_mem_get_info(self._h(), ctypes.byref(free), ctypes.byref(total)),
               "gpool_mem_get_info")
        return free.value, total.value

    def page_size(self, size, kind="device"):
        """The page (chunk) size gpool would back a block of ``size`` bytes with."""
        out = ctypes.c_size_t()
        size = _args.size(size, "gpool_page_size")
        kind = _args.enum(kind, KINDS, "kind", "gpool_page_size")
        _check(self._lib.gpool_page_size(self._h(), kind, size,
                                         ctypes.byref(out)), "gpool_page_size")
        return out.value

    def snapshot_json(self):
        """gpool_dump_json's text."""
        libc = ctypes.CDLL(None)
        libc.open_memstream.restype = ctypes.c_void_p
        libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p),
                                        ctypes.POINTER(ctypes.c_size_t)]
        libc.fclose.argtypes = [ctypes.c_void_p]
        libc.free.argtypes = [ctypes.c_void_p]
        buf = ctypes.c_char_p()
        size = ctypes.c_size_t()
        f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
        if not f:
            raise Error(10, "open_memstream failed", "gpool_dump_json")
        st = self._lib.gpool_dump_json(self._h(), f)
        libc.fclose(f)
        try:
            text = ctypes.string_at(buf, size.value).decode()
        finally:
            libc.free(ctypes.cast(buf, ctypes.c_void_p))
        _check(st, "gpool_dump_json")
        return text

    def snapshot(self):
        """The pool's address ranges, blocks and stats as a dict (gpool_dump_json)."""
        return json.loads(self.snapshot_json())

    def close(self):
        """Destroy the pool (a borrowed one is only let go). Raises Error
        (GPOOL_ERR_LIVE_BLOCKS) when blocks were still live; they are freed anyway."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        if self._owned:
            _check(self._lib.gpool_destroy(handle), "gpool_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None and self._owned:
                self._lib.gpool_destroy(self._handle)
                self._handle = None
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self._handle is None else "0x%x" % self._handle.value
        return "<gpool.Pool device=%d %s>" % (self.device, state)


from . import ipc as _ipc  # noqa: E402  Pool.export / import_ / close_imported (gpool/ipc.py)
_ipc._attach(Pool)
