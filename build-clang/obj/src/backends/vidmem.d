build-clang/obj/src/backends/vidmem.o: src/backends/vidmem.c \
  src/backends/vidmem.h src/backends/backend.h include/gpool.h \
  src/placement/heap.h src/backends/driver.h src/api/error.h \
  src/placement/arena.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/policy/pagesize.h

src/backends/vidmem.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/backends/driver.h:

src/api/error.h:

src/placement/arena.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/policy/pagesize.h:
