build-clang/obj/src/ipc/ipc_export.o: src/ipc/ipc_export.c \
  src/api/error.h include/gpool.h src/ipc/ipc.h src/api/pool.h \
  src/placement/arena.h src/backends/backend.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h src/backends/driver.h \
  src/streams/stream.h src/backends/vidmem.h

src/api/error.h:

include/gpool.h:

src/ipc/ipc.h:

src/api/pool.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/backends/driver.h:

src/streams/stream.h:

src/backends/vidmem.h:
