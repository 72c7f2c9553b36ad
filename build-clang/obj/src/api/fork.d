build-clang/obj/src/api/fork.o: src/api/fork.c src/api/error.h \
  include/gpool.h src/api/fork.h

src/api/error.h:

include/gpool.h:

src/api/fork.h:
