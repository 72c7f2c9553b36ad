build-clang/obj/src/kinds/kind_host.o: src/kinds/kind_host.c \
  src/kinds/kind_host.h include/gpool.h src/policy/policy.h \
  src/api/bad_pointer.h src/api/error.h src/kinds/kind.h \
  src/placement/arena.h src/backends/backend.h src/placement/heap.h \
  src/placement/ptrmap.h src/policy/sizeclass.h src/policy/ladder.h \
  src/api/pool.h src/backends/driver.h src/streams/stream.h \
  src/backends/host_pages.h src/backends/host_numa.h \
  src/streams/host_clock.h src/placement/host_small.h

src/kinds/kind_host.h:

include/gpool.h:

src/policy/policy.h:

src/api/bad_pointer.h:

src/api/error.h:

src/kinds/kind.h:

src/placement/arena.h:

src/backends/backend.h:

src/placement/heap.h:

src/placement/ptrmap.h:

src/policy/sizeclass.h:

src/policy/ladder.h:

src/api/pool.h:

src/backends/driver.h:

src/streams/stream.h:

src/backends/host_pages.h:

src/backends/host_numa.h:

src/streams/host_clock.h:

src/placement/host_small.h:
