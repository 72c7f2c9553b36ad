build-clang/obj/src/api/bad_pointer.o: src/api/bad_pointer.c \
  src/api/bad_pointer.h include/gpool.h src/api/error.h \
  src/policy/policy.h

src/api/bad_pointer.h:

include/gpool.h:

src/api/error.h:

src/policy/policy.h:
