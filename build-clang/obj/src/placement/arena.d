build-clang/obj/src/placement/arena.o: src/placement/arena.c \
  src/placement/arena_internal.h src/placement/arena.h \
  src/backends/backend.h include/gpool.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h src/api/bad_pointer.h \
  src/placement/check.h src/api/error.h

src/placement/arena_internal.h:

src/placement/arena.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/api/bad_pointer.h:

src/placement/check.h:

src/api/error.h:
