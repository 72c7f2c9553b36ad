build-clang/obj/src/kinds/kind_device.o: src/kinds/kind_device.c \
  src/api/error.h include/gpool.h src/kinds/kind.h src/placement/arena.h \
  src/backends/backend.h src/placement/heap.h src/placement/ptrmap.h \
  src/policy/sizeclass.h src/policy/policy.h src/policy/ladder.h \
  src/api/pool.h src/backends/driver.h src/streams/stream.h \
  src/kinds/tcache.h src/backends/vidmem.h

src/api/error.h:

include/gpool.h:

src/kinds/kind.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/policy/policy.h:

src/policy/ladder.h:

src/api/pool.h:

src/backends/driver.h:

src/streams/stream.h:

src/kinds/tcache.h:

src/backends/vidmem.h:
