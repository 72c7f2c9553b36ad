build-clang/obj/src/backends/host_numa.o: src/backends/host_numa.c \
  src/backends/host_numa.h src/backends/driver.h include/gpool.h

src/backends/host_numa.h:

src/backends/driver.h:

include/gpool.h:
