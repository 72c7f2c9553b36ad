build-clang/obj/src/api/options.o: src/api/options.c src/api/options.h \
  include/gpool.h src/api/structs.h src/api/error.h src/api/size_parse.h

src/api/options.h:

include/gpool.h:

src/api/structs.h:

src/api/error.h:

src/api/size_parse.h:
