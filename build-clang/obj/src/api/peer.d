build-clang/obj/src/api/peer.o: src/api/peer.c src/api/error.h \
  include/gpool.h src/api/pool.h src/placement/arena.h \
  src/backends/backend.h src/placement/heap.h src/placement/ptrmap.h \
  src/policy/sizeclass.h src/backends/driver.h src/backends/vidmem.h

src/api/error.h:

include/gpool.h:

src/api/pool.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/backends/driver.h:

src/backends/vidmem.h:
