build-clang/obj/src/kinds/tcache.o: src/kinds/tcache.c src/api/error.h \
  include/gpool.h src/policy/policy.h src/api/pool.h \
  src/placement/arena.h src/backends/backend.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h src/backends/driver.h \
  src/kinds/tcache.h

src/api/error.h:

include/gpool.h:

src/policy/policy.h:

src/api/pool.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/backends/driver.h:

src/kinds/tcache.h:
