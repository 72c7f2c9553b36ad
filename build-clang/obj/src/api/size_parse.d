build-clang/obj/src/api/size_parse.o: src/api/size_parse.c \
  src/api/size_parse.h

src/api/size_parse.h:
