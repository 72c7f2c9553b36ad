build-clang/obj/src/api/registry.o: src/api/registry.c \
  src/placement/arena.h src/backends/backend.h include/gpool.h \
  src/placement/heap.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/api/error.h src/api/pool.h src/backends/driver.h

src/placement/arena.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/api/error.h:

src/api/pool.h:

src/backends/driver.h:
