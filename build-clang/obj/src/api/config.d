build-clang/obj/src/api/config.o: src/api/config.c src/api/error.h \
  include/gpool.h src/api/options.h include/../preload/preload_options.h \
  src/api/pool.h src/placement/arena.h src/backends/backend.h \
  src/placement/heap.h src/placement/ptrmap.h src/policy/sizeclass.h \
  src/backends/driver.h src/api/structs.h

src/api/error.h:

include/gpool.h:

src/api/options.h:

include/../preload/preload_options.h:

src/api/pool.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/backends/driver.h:

src/api/structs.h:
