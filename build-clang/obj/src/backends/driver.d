build-clang/obj/src/backends/driver.o: src/backends/driver.c \
  src/backends/driver.h include/gpool.h src/api/error.h

src/backends/driver.h:

include/gpool.h:

src/api/error.h:
