build-clang/obj/src/api/block_size.o: src/api/block_size.c \
  src/placement/arena.h src/backends/backend.h include/gpool.h \
  src/placement/heap.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/api/bad_pointer.h src/api/error.h src/policy/policy.h \
  src/api/pool.h src/backends/driver.h

src/placement/arena.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/api/bad_pointer.h:

src/api/error.h:

src/policy/policy.h:

src/api/pool.h:

src/backends/driver.h:
