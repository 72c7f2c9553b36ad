build-clang/obj/src/api/structs.o: src/api/structs.c src/api/error.h \
  include/gpool.h src/api/structs.h

src/api/error.h:

include/gpool.h:

src/api/structs.h:
