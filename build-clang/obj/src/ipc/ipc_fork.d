build-clang/obj/src/ipc/ipc_fork.o: src/ipc/ipc_fork.c src/ipc/ipc.h \
  include/gpool.h

src/ipc/ipc.h:

include/gpool.h:
