build-clang/obj/src/placement/arena_dump.o: src/placement/arena_dump.c \
  src/placement/arena_internal.h src/placement/arena.h \
  src/backends/backend.h include/gpool.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h

src/placement/arena_internal.h:

src/placement/arena.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:
