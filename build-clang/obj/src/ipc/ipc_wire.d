build-clang/obj/src/ipc/ipc_wire.o: src/ipc/ipc_wire.c src/ipc/ipc.h \
  include/gpool.h

src/ipc/ipc.h:

include/gpool.h:
