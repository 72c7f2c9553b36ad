build-clang/obj/src/api/pool.o: src/api/pool.c src/api/bad_pointer.h \
  include/gpool.h src/api/error.h src/api/fork.h src/ipc/ipc.h \
  src/kinds/kind.h src/placement/arena.h src/backends/backend.h \
  src/placement/heap.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/policy/policy.h src/api/pool.h src/backends/driver.h \
  src/streams/stream.h src/api/structs.h src/kinds/tcache.h

src/api/bad_pointer.h:

include/gpool.h:

src/api/error.h:

src/api/fork.h:

src/ipc/ipc.h:

src/kinds/kind.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/policy/policy.h:

src/api/pool.h:

src/backends/driver.h:

src/streams/stream.h:

src/api/structs.h:

src/kinds/tcache.h:
