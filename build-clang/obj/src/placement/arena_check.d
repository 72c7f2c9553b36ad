build-clang/obj/src/placement/arena_check.o: src/placement/arena_check.c \
  src/placement/arena_internal.h src/placement/arena.h \
  src/backends/backend.h include/gpool.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h src/placement/check.h

src/placement/arena_internal.h:

src/placement/arena.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/placement/check.h:
