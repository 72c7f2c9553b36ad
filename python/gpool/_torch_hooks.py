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
  set_release_pool                    gpool_torch_release_pool                2.1 and later

set_release_pool is installed only together with one of the begin setters (the release frees
graph memory once every begun pool is released, so it must see every begin). The end setters
are not needed: the alloc hook asks the driver whether its stream captures.
"""

import ctypes

#: (setter, gpool function), in the order they are installed
SETTERS = (
    ("set_record_stream_fn", "gpool_torch_record_stream"),
    ("set_reset_fn", "gpool_torch_empty_cache"),
    ("set_begin_allocate_to_pool", "gpool_torch_begin_allocate_to_pool"),
    ("set_begin_allocate_stream_to_pool", "gpool_torch_begin_allocate_stream_to_pool"),
    ("set_release_pool", "gpool_torch_release_pool"),
)
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
        # only one begin hook: the 2.3+ form where both exist
        if name == "set_begin_allocate_stream_to_pool" and "set_begin_allocate_to_pool" in installed:
            continue
        address = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        getattr(raw, name)(address)
        installed.append(name)
    return installed
