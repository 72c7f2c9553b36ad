build-clang/obj/src/backends/host_pages.o: src/backends/host_pages.c \
  src/backends/host_pages.h src/backends/backend.h include/gpool.h \
  src/placement/heap.h src/backends/driver.h src/backends/host_numa.h \
  src/placement/arena.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/api/error.h

src/backends/host_pages.h:

src/backends/backend.h:

include/gpool.h:

src/placement/heap.h:

src/backends/driver.h:

src/backends/host_numa.h:

src/placement/arena.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/api/error.h:
