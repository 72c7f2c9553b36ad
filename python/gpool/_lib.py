"""ctypes declarations of include/gpool.h and the loader of libgpool.so.

The structures mirror the C header field by field; python/tests/test_layout.py compiles a small
C program against include/gpool.h and checks every size and offset, and that no field was added
to the header without being added here.
"""

import ctypes
import ctypes.util
import os

GPOOL_MEM_KIND_COUNT = 4
GPOOL_DRV_COUNT = 14
#: array bounds of the public structs (fixed within a major version; gpool.h)
GPOOL_MEM_KIND_SLOTS = 8
GPOOL_DRV_SLOTS = 32

#: gpool_status values (include/gpool.h)
STATUS_NAMES = {
    0: "GPOOL_OK",
    1: "GPOOL_ERR_INVALID_ARG",
    2: "GPOOL_ERR_OUT_OF_MEMORY",
    3: "GPOOL_ERR_INVALID_POINTER",
    4: "GPOOL_ERR_NO_DRIVER",
    5: "GPOOL_ERR_NO_DEVICE",
    6: "GPOOL_ERR_UNSUPPORTED",
    7: "GPOOL_ERR_DRIVER",
    8: "GPOOL_ERR_CONFIG",
    9: "GPOOL_ERR_LIVE_BLOCKS",
    10: "GPOOL_ERR_IO",
}

#: gpool_mem_kind, by the names the Python API takes and returns
KINDS = {"auto": 0, "device": 1, "pinned": 2, "mapped": 3}
KIND_NAMES = {v: k for k, v in KINDS.items()}
#: gpool_usage
USAGES = {
    "default": 0,
    "gpu_only": 1,
    "upload": 2,
    "readback": 3,
    "staging": 4,
    "multi_gpu": 5,
    "large_dataset": 6,
}
USAGE_NAMES = {v: k for k, v in USAGES.items()}
#: GPOOL_ALLOC_* flags
FLAGS = {"zero": 1 << 0, "allow_fallback": 1 << 1, "stream_wait": 1 << 2, "no_stream_wait": 1 << 3,
         "in_capture": 1 << 4}


class _Sized(ctypes.Structure):
    """A public struct that starts with struct_size (gpool.h, "Structs that grow"): a new one
    has it set to this layout's size, as the C initializer macros (GPOOL_*_INIT) do."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.struct_size:
            self.struct_size = ctypes.sizeof(type(self))


class gpool_alloc_params(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("usage", ctypes.c_int),
        ("alignment", ctypes.c_size_t),
        ("page_size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
    ]


class gpool_config(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("release_threshold", ctypes.c_size_t),
        ("tcache_bytes", ctypes.c_size_t),
        ("small_max", ctypes.c_size_t),
        ("budget", ctypes.c_size_t * GPOOL_MEM_KIND_SLOTS),
        ("va_reserve", ctypes.c_size_t),
        ("verbose", ctypes.c_int),
        ("default_stream", ctypes.c_void_p),
        ("trace_path", ctypes.c_char_p),  # library-owned after gpool_config_parse
        ("peer_access", ctypes.c_int),
        ("reserved0", ctypes.c_int),
        ("stream_reuse", ctypes.c_int),
        ("reserved1", ctypes.c_int),
        ("ipc", ctypes.c_int),  # gpool/ipc.py, docs/ipc.md
    ]


class gpool_kind_stats(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "requested_bytes",
            "in_use_bytes",
            "reserved_bytes",
            "cached_bytes",
            "peak_requested_bytes",
            "peak_in_use_bytes",
            "peak_reserved_bytes",
            "peak_cached_bytes",
            "allocs",
            "frees",
            "live_blocks",
        )
    ]


class gpool_stats(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", gpool_kind_stats * GPOOL_MEM_KIND_SLOTS),
        ("driver_calls", ctypes.c_uint64 * GPOOL_DRV_SLOTS),
        ("driver_calls_total", ctypes.c_uint64),
        ("oom_retries", ctypes.c_uint64),
        ("ooms", ctypes.c_uint64),
        ("fallbacks", ctypes.c_uint64),
        ("pages_remapped", ctypes.c_uint64),
        ("tcache_hits", ctypes.c_uint64),
        ("pending_frees", ctypes.c_uint64),
    ]


class gpool_block_desc(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("usage", ctypes.c_int),
        ("requested_size", ctypes.c_size_t),
        ("size", ctypes.c_size_t),
        ("page_size", ctypes.c_size_t),
        ("device_ptr", ctypes.c_uint64),
        ("host_ptr", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        ("device", ctypes.c_int),
        ("fell_back", ctypes.c_int),
    ]


class gpool_torch_batch_stats(ctypes.Structure):
    """include/gpool_torch.h's free batch of one device (fixed layout)."""

    _fields_ = [
        ("blocks", ctypes.c_size_t),
        ("bytes", ctypes.c_size_t),
        ("requested_bytes", ctypes.c_size_t),
        ("limit", ctypes.c_size_t),
        ("frees", ctypes.c_ulonglong),
        ("flushes", ctypes.c_ulonglong),
        ("graph_blocks", ctypes.c_size_t),
        ("graph_bytes", ctypes.c_size_t),
    ]


class gpool_torch_mempool_id(ctypes.Structure):
    """include/gpool_torch.h's PyTorch pool id (c10::cuda::MempoolId_t)."""

    _fields_ = [("first", ctypes.c_ulonglong), ("second", ctypes.c_ulonglong)]


#: every structure mirrored here, by its C name (the layout test walks this)
STRUCTS = {
    "gpool_alloc_params": gpool_alloc_params,
    "gpool_config": gpool_config,
    "gpool_kind_stats": gpool_kind_stats,
    "gpool_stats": gpool_stats,
    "gpool_block_desc": gpool_block_desc,
}

_P = ctypes.c_void_p
_S = ctypes.c_int  # gpool_status
_SIGNATURES = {
    "gpool_version": (ctypes.c_char_p, []),
    "gpool_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "gpool_last_error": (ctypes.c_char_p, []),
    "gpool_driver_call_name": (ctypes.c_char_p, [ctypes.c_int]),
    "gpool_config_default": (_S, [ctypes.POINTER(gpool_config)]),
    "gpool_config_parse": (_S, [ctypes.POINTER(gpool_config), ctypes.c_char_p]),
    "gpool_create": (_S, [ctypes.POINTER(gpool_config), ctypes.POINTER(_P)]),
    "gpool_destroy": (_S, [_P]),
    "gpool_alloc": (_S, [_P, ctypes.c_size_t, ctypes.POINTER(gpool_alloc_params), ctypes.POINTER(_P)]),
    "gpool_alloc_async": (
        _S,
        [_P, ctypes.c_size_t, ctypes.POINTER(gpool_alloc_params), _P, ctypes.POINTER(_P)],
    ),
    "gpool_free": (_S, [_P, _P]),
    "gpool_free_async": (_S, [_P, _P, _P]),
    "gpool_record_stream": (_S, [_P, _P, _P]),
    "gpool_trim": (_S, [_P, ctypes.c_size_t]),
    "gpool_get_stats": (_S, [_P, ctypes.POINTER(gpool_stats)]),
    "gpool_get_block_desc": (_S, [_P, _P, ctypes.POINTER(gpool_block_desc)]),
    "gpool_mem_get_info": (
        _S,
        [_P, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
    ),
    "gpool_page_size": (_S, [_P, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "gpool_dump_json": (_S, [_P, _P]),
    "gpool_torch_alloc": (_P, [ctypes.c_size_t, ctypes.c_int, _P]),
    "gpool_torch_free": (None, [_P, ctypes.c_size_t, ctypes.c_int, _P]),
    "gpool_torch_empty_cache": (None, []),
    "gpool_torch_pool": (_P, [ctypes.c_int]),
    "gpool_torch_release_graph_memory": (_S, []),
    "gpool_torch_get_batch_stats": (_S, [ctypes.c_int, ctypes.POINTER(gpool_torch_batch_stats)]),
    "gpool_torch_record_stream": (None, [_P, _P]),
    "gpool_torch_begin_allocate_to_pool": (None, [ctypes.c_int, gpool_torch_mempool_id, _P]),
    "gpool_torch_begin_allocate_stream_to_pool": (None, [ctypes.c_int, _P, gpool_torch_mempool_id]),
    "gpool_torch_release_pool": (None, [ctypes.c_int, gpool_torch_mempool_id]),
    "gpool_torch_live_pools": (ctypes.c_size_t, []),
    "gpool_torch_get_peaks": (_S, [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                                   ctypes.POINTER(ctypes.c_size_t)]),
    "gpool_torch_reset_peaks": (None, [ctypes.c_int]),
    "gpool_torch_get_freed": (
        _S,
        [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
}

_lib = None
_lib_path = None


def _candidates():
    """Where libgpool.so is looked for, in order: next to the package, $GPOOL_LIBRARY, the
    system's library path. Yields (path, where, reason): reason is None for a path to load,
    else why it was passed over (a file next to the package that is not there, an unset
    $GPOOL_LIBRARY), so that the loader's error names every place it looked."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libgpool.so", "libgpool.so.0"):
        path = os.path.join(here, name)
        yield path, "next to the package", None if os.path.exists(path) else "not found"
    env = os.environ.get("GPOOL_LIBRARY")
    yield env or "$GPOOL_LIBRARY", "$GPOOL_LIBRARY", None if env else "not set"
    found = ctypes.util.find_library("gpool")
    if found and found != "libgpool.so.0":
        yield found, "the system library path", None
    yield "libgpool.so.0", "the system library path", None


def library_path():
    """The path of the libgpool.so in use (loading it if needed)."""
    load()
    return _lib_path


def load():
    """Load libgpool.so once and declare its functions; raises OSError saying where it looked."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path, where, reason in _candidates():
        if reason is None:
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                reason = str(e)
        if reason is not None:
            # "$GPOOL_LIBRARY: not set"; "/x/libgpool.so ($GPOOL_LIBRARY): No such file ..."
            tried.append("%s: %s" % (path if path == where else "%s (%s)" % (path, where),
                                     reason))
            continue
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name, None)
            if fn is None:
                continue  # an older library without this entry point
            fn.restype = res
            fn.argtypes = args
        _lib, _lib_path = lib, _resolve(lib, path)
        return lib
    raise OSError(
        "gpool: cannot load libgpool.so (install it next to the package, set $GPOOL_LIBRARY, "
        "or make install); tried, in order: " + "; ".join(tried)
    )


def _resolve(lib, path):
    """The file a loaded library came from (dladdr), so that other loaders (PyTorch) open the
    very same file."""
    if os.path.isabs(path):
        return path
    if os.sep in path:
        return os.path.abspath(path)

    class Dl_info(ctypes.Structure):
        _fields_ = [
            ("dli_fname", ctypes.c_char_p),
            ("dli_fbase", ctypes.c_void_p),
            ("dli_sname", ctypes.c_char_p),
            ("dli_saddr", ctypes.c_void_p),
        ]

    try:
        libdl = ctypes.CDLL(None)
        info = Dl_info()
        addr = ctypes.cast(lib.gpool_version, ctypes.c_void_p)
        if libdl.dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        pass
    return path
