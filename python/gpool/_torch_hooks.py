"""Which of PyTorch's pluggable-allocator setters this torch has, and gpool's function for each.

torch.cuda.memory.CUDAPluggableAllocator(path, alloc, free).allocator() is a
torch._C._CUDAPluggableAllocator; from torch 2.1 its Python binding (torch/csrc/cuda/Module.cpp)
has setters that take a C function's address (torch/csrc/cuda/CUDAPluggableAllocator.h). Their
set changed between versions, so each is looked up by name and used only where present:

  setter                              gpool's function                        torch
  set_record_stream_fn                gpool_torch_record_stream               2.1 and later
  set_reset_fn (torch.cuda.empty_cache) gpool_torch_empty_cache               2.1 and later
  set_begin_allocate_stream_to_pool   gpool_torch_begin_allocate_stream_to_pool  2.1, 2.2
  set_begin_allocate_to_pool          gpool_torch_begin_allocate_to_pool      2.3 and later
  set_end_allocate_stream_to_pool_fn  gpool_torch_end_allocate_stream_to_pool 2.1, 2.2
  set_end_allocate_to_pool_fn         gpool_torch_end_allocate_to_pool        2.3 and later
  set_release_pool                    gpool_torch_release_pool                2.1 and later

set_release_pool is installed only together with one of the begin setters (a pool's graph
memory goes back at its release, so the release must see every begin), and each end setter only
with its own begin. Whether a stream captures the alloc hook asks the driver; the begin and end
hooks tell which pool a capture allocates to, so that each pool's memory goes back at its own
release. The versions are read from torch/csrc/cuda/Module.cpp and CUDAPluggableAllocator.h.
"""

import ctypes

#: (setter, gpool function), in the order they are installed
SETTERS = (
    ("set_record_stream_fn", "gpool_torch_record_stream"),
    ("set_reset_fn", "gpool_torch_empty_cache"),
    ("set_begin_allocate_to_pool", "gpool_torch_begin_allocate_to_pool"),
    ("set_begin_allocate_stream_to_pool", "gpool_torch_begin_allocate_stream_to_pool"),
    ("set_end_allocate_to_pool_fn", "gpool_torch_end_allocate_to_pool"),
    ("set_end_allocate_stream_to_pool_fn", "gpool_torch_end_allocate_stream_to_pool"),
    ("set_release_pool", "gpool_torch_release_pool"),
)
#: each end setter and the begin setter it closes
END_OF = {"set_end_allocate_to_pool_fn": "set_begin_allocate_to_pool",
          "set_end_allocate_stream_to_pool_fn": "set_begin_allocate_stream_to_pool"}
BEGIN_SETTERS = ("set_begin_allocate_to_pool", "set_begin_allocate_stream_to_pool")


def available(raw):
    """The setters ``raw`` (a torch._C._CUDAPluggableAllocator) has, in SETTERS order."""
    return [name for name, _ in SETTERS if callable(getattr(raw, name, None))]


def install(raw, lib):
    """Give ``raw`` gpool's function for each setter it has (libgpool.so ``lib``); returns the
    names installed. A release-pool setter without a begin setter is left unset."""
    have = available(raw)
    installed = []
    for name, symbol in SETTERS:
        if name not in have or not hasattr(lib, symbol):
            continue
        if name == "set_release_pool" and not any(b in installed for b in BEGIN_SETTERS):
            continue
        if name in END_OF and END_OF[name] not in installed:
            continue
        # only one begin hook: the 2.3+ form where both exist
        if name == "set_begin_allocate_stream_to_pool" and "set_begin_allocate_to_pool" in installed:
            continue
        address = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        getattr(raw, name)(address)
        installed.append(name)
    return installed
