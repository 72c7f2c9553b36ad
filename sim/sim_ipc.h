/* sim_ipc.h — shareable memory of the simulated driver (sim_ipc.c). Not installed. */
#ifndef GPOOL_SIM_IPC_H
#define GPOOL_SIM_IPC_H

#include <stdint.h>

#include "sim_internal.h"

#pragma GCC visibility push(hidden)

/* The metadata page after the bytes of a shareable memfd. */
#define SIM_IPC_META_BYTES ((uint64_t)4096)
enum sim_ipc_kind { SIM_IPC_VMM = 1, SIM_IPC_LEGACY = 2 };
struct sim_ipc_meta {
    uint64_t magic; /* set by sim_ipc_create */
    uint32_t kind;  /* enum sim_ipc_kind */
    int32_t device; /* -1: host-located VMM memory */
    uint64_t size;  /* bytes before the metadata page */
    uint64_t nonce;
    int32_t pid; /* creating process */
    /* VMM: the handle's CUmemAllocationProp fields */
    uint32_t prop_type, loc_type;
    int32_t loc_id;
    uint32_t handle_types;
    unsigned char alloc_flags[8]; /* CUmemAllocationProp.allocFlags, as it is */
};

/* What a legacy CUipcMemHandle names. */
struct sim_ipc_key {
    int32_t pid, fd;
    uint64_t dev, ino, nonce, size;
    int32_t device;
};

uint64_t sim_ipc_nonce(void);
/* A new memfd of meta->size bytes plus the metadata page: the descriptor, or -1. */
int sim_ipc_create(const struct sim_ipc_meta *meta);
/* Read and check the metadata of a descriptor: 0, or -1 when it is not shareable memory. */
int sim_ipc_read_meta(int fd, struct sim_ipc_meta *out);
/* A new open file description of process pid's (0: this process's) descriptor fd, or -1. */
int sim_ipc_reopen(int pid, int fd);
/* The importer's read lock on the first metadata byte (the referee's open count). */
int sim_ipc_hold(int fd, uint64_t size);
/* Does another open file description hold that lock? */
int sim_ipc_held_elsewhere(int fd, uint64_t size);
void sim_ipc_count_freed_open(void); /* lock held */

/* sim_legacy.c, lock held: make the cuMemAlloc allocation based at p shareable and say what
 * its handle names; find / add / close this process's opened handles. */
CUresult sim_legacy_ipc_export(uintptr_t p, struct sim_ipc_key *out);
int sim_legacy_ipc_find_open(const struct sim_ipc_key *k, uintptr_t *p, unsigned flags);
CUresult sim_legacy_ipc_add_open(uintptr_t p, const struct sim_ipc_key *k,
                                 const struct sim_ipc_meta *m, int fd, unsigned flags);
CUresult sim_legacy_ipc_close(uintptr_t p);

#pragma GCC visibility pop

#endif /* GPOOL_SIM_IPC_H */
