build-clang/obj/src/api/error.o: src/api/error.c src/api/error.h \
  include/gpool.h

src/api/error.h:

include/gpool.h:
