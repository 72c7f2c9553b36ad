/* test_ipc.c — sharing device blocks between two real processes through the C API
 * (gpool_export_block / gpool_import_block / gpool_close_imported, docs/ipc.md) on the
 * simulator: content written by one process is read by the other, a block freed by its owner
 * while imported is not reused until the importer closes it, an importer that dies leaks
 * nothing, many blocks and importers, and handles that are forged, stale, foreign or the pool's
 * own answer a clear error with nothing mapped.
 *
 * Each test forks its importers before any pool exists (a child forked after CUDA initialised
 * cannot use the parent's context), and passes handles over pipes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

/* One importer process: it reads commands from its pipe and answers on another. */
typedef struct child {
    pid_t pid;
    int to, from; /* parent's ends */
} child;

/* the child's side: (in, out) are its ends */
typedef int (*child_fn)(int in, int out);

static child spawn(child_fn fn)
{
    int a[2], b[2];
    cr_assert(pipe(a) == 0 && pipe(b) == 0);
    child c = {.pid = fork()};
    cr_assert(c.pid >= 0);
    if (c.pid == 0) {
        /* only its own pipe ends: an earlier importer's (inherited) would keep it open */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != a[0] && fd != b[1]) close(fd);
        _exit(fn(a[0], b[1]));
    }
    close(a[0]);
    close(b[1]);
    c.to = a[1];
    c.from = b[0];
    return c;
}

static int read_full(int fd, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    return write(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

static int child_wait(child *c)
{
    int status = 0;
    close(c->to);
    close(c->from);
    cr_assert(waitpid(c->pid, &status, 0) == c->pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A message of the test protocol: a handle, a size to check and a pattern seed. */
typedef struct msg {
    gpool_ipc_handle h;
    uint64_t check_bytes;
    uint32_t seed, op; /* op: 0 read and close, 1 read, answer, wait, read again, close, 2 read,
                          answer, then exit without closing, 3 import: answer the status, 4 as 1
                          with a child forked after the import */
} msg;

/* ---------- the importer ---------- */

static int importer(int in, int out)
{
    gpool_t *pool = test_pool(NULL);
    if (!pool) return 90;
    msg m;
    int rc = 0;
    while (read_full(in, &m, sizeof m) == 0) {
        void *p = NULL;
        gpool_status st = gpool_import_block(pool, &m.h, &p);
        if (m.op == 3) {
            int32_t ans = st;
            write_full(out, &ans, sizeof ans);
            if (st == GPOOL_OK) gpool_close_imported(pool, p);
            continue;
        }
        if (st != GPOOL_OK) {
            fprintf(stderr, "importer: %s\n", gpool_last_error());
            return 91;
        }
        int32_t ok = check_pattern(p, m.check_bytes, m.seed);
        if (m.op == 4 && fork() == 0) { /* a child that outlives the import by 3 s */
            sleep(3);
            _exit(0);
        }
        if (m.op == 1 || m.op == 2 || m.op == 4) {
            write_full(out, &ok, sizeof ok);
            if (m.op == 2) _exit(0); /* dies with the block open */
            char go;
            if (read_full(in, &go, 1) != 0) return 92;
            ok = ok && check_pattern(p, m.check_bytes, m.seed);
        }
        if (!ok) rc = 93;
        if (gpool_close_imported(pool, p) != GPOOL_OK) return 94;
        write_full(out, &ok, sizeof ok);
    }
    struct gpoolsim_live live;
    const struct sim_api *S = sim_api();
    if (gpool_destroy(pool) != GPOOL_OK) return 95;
    if (S) {
        S->get_live(&live);
        if (live.mappings || live.reservations || live.handles) return 96;
    }
    return rc;
}

static gpool_t *exporter_pool(void)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_config_parse(&cfg, "ipc=1"), GPOOL_OK);
    gpool_status st = gpool_create(&cfg, &pool);
    /* the simulator's half of issue 28 (shareable handles, branch ipcsim) */
    if (st == GPOOL_ERR_UNSUPPORTED && strstr(gpool_last_error(), "POSIX file descriptors"))
        cr_skip_test("the simulator cannot export memory yet: %s", gpool_last_error());
    cr_assert_eq(st, GPOOL_OK, "%s", gpool_last_error());
    return pool;
}

static int block_live(gpool_t *pool, void *p)
{
    size_t sz;
    return gpool_block_size(pool, p, &sz) == GPOOL_OK;
}

/* Wait (up to ms) for the helper thread to carry out a deferred free. */
static int wait_freed_ms(gpool_t *pool, void *p, int ms)
{
    for (int i = 0; i < ms / 10 && block_live(pool, p); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return !block_live(pool, p);
}

static int wait_freed(gpool_t *pool, void *p)
{
    return wait_freed_ms(pool, p, 5000);
}

/* A block of `bytes` filled from `seed`, exported and sent to importer c with `op`; the
 * importer's first answer must be 1. The block. */
static void *send_block(child *c, gpool_t *pool, size_t bytes, uint32_t seed, int op)
{
    void *p;
    cr_assert_eq(gpool_alloc(pool, bytes, NULL, &p), GPOOL_OK);
    fill_pattern(p, bytes, seed);
    msg m = {.check_bytes = bytes, .seed = seed, .op = op};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(write_full(c->to, &m, sizeof m), 0);
    int32_t ok = 0;
    cr_assert_eq(read_full(c->from, &ok, sizeof ok), 0);
    cr_assert(ok);
    return p;
}

static void init(void)
{
    NEED_SIM();
    NEED_HOST_VIDMEM();
    signal(SIGPIPE, SIG_IGN);
}

/* ---------- no second process needed ---------- */

/* Threads exporting one block at the same moment (two cudaIpcGetMemHandle calls of a
 * program's threads): CUDA gives one handle per allocation, and gpool one export a block --
 * two would leave one behind when the block is freed, pinning its pages. */
enum { EXPORTERS = 6 };
typedef struct export_race {
    gpool_t *pool;
    void *p;
    pthread_barrier_t *go;
    gpool_ipc_handle h;
    gpool_status st;
} export_race;

static void *export_at_once(void *arg)
{
    export_race *r = arg;
    pthread_barrier_wait(r->go);
    r->st = gpool_export_block(r->pool, r->p, &r->h);
    return NULL;
}

Test(ipc, threads_exporting_one_block_get_one_handle, .init = init)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cfg.ipc = 1;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(&cfg, &pool), GPOOL_OK, "%s", gpool_last_error());
    for (int round = 0; round < 20; round++) {
        void *p;
        cr_assert_eq(gpool_alloc(pool, 6 * MiB, NULL, &p), GPOOL_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, EXPORTERS);
        export_race r[EXPORTERS];
        pthread_t t[EXPORTERS];
        for (int i = 0; i < EXPORTERS; i++) {
            r[i] = (export_race){.pool = pool, .p = p, .go = &go};
            cr_assert_eq(pthread_create(&t[i], NULL, export_at_once, &r[i]), 0);
        }
        for (int i = 0; i < EXPORTERS; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < EXPORTERS; i++) {
            cr_assert_eq(r[i].st, GPOOL_OK);
            cr_assert_eq(memcmp(&r[i].h, &r[0].h, sizeof r[0].h), 0,
                         "round %d: thread %d got another export of the same block", round, i);
        }
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A child forked from the owner of an ipc pool (gpool.h: in a forked child every call on a
 * parent's pool answers GPOOL_ERR_DRIVER, since CUDA state does not survive fork): the IPC
 * calls too, and the child's free of an exported block is refused rather than "deferred". */
Test(ipc, a_forked_child_gets_the_fork_error_from_ipc_calls, .init = init)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cfg.ipc = 1;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(&cfg, &pool), GPOOL_OK, "%s", gpool_last_error());
    void *p;
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &p), GPOOL_OK);
    gpool_ipc_handle h;
    cr_assert_eq(gpool_export_block(pool, p, &h), GPOOL_OK, "%s", gpool_last_error());
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        void *q = NULL;
        int bad = 0;
        if (gpool_import_block(pool, &h, &q) != GPOOL_ERR_DRIVER) bad |= 1;
        if (gpool_close_imported(pool, p) != GPOOL_ERR_DRIVER) bad |= 2;
        if (gpool_export_block(pool, p, &h) != GPOOL_ERR_DRIVER) bad |= 4;
        if (gpool_free(pool, p) != GPOOL_ERR_DRIVER) bad |= 8;
        _exit(bad);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's calls that did not refuse: %d",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(ipc, config_key_ipc)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_assert_eq(cfg.ipc, 0);
    cr_assert_eq(gpool_config_parse(&cfg, "ipc=1"), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(cfg.ipc, 1);
    cr_assert_eq(gpool_config_parse(&cfg, "ipc=2"), GPOOL_ERR_CONFIG);
    cr_assert_eq(sizeof(gpool_ipc_handle), 64);
}

Test(ipc, export_needs_an_ipc_pool, .init = init)
{
    gpool_t *pool = test_pool(NULL);
    void *p;
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &p), GPOOL_OK);
    gpool_ipc_handle h;
    cr_assert_eq(gpool_export_block(pool, p, &h), GPOOL_ERR_UNSUPPORTED);
    cr_assert(strstr(gpool_last_error(), "ipc"), "%s", gpool_last_error());
    gpool_free(pool, p);
    gpool_destroy(pool);
}

Test(ipc, forged_damaged_own_and_unknown_handles_are_refused, .init = init)
{
    gpool_t *pool = exporter_pool();
    void *p, *q = NULL;
    cr_assert_eq(gpool_alloc(pool, 3 * MiB, NULL, &p), GPOOL_OK);
    gpool_ipc_handle h, bad;
    cr_assert_eq(gpool_export_block(pool, p, &h), GPOOL_OK, "%s", gpool_last_error());
    struct gpoolsim_live before, after;
    const struct sim_api *S = sim_api();
    S->get_live(&before);
    /* the pool's own export */
    cr_assert_eq(gpool_import_block(pool, &h, &q), GPOOL_ERR_INVALID_ARG);
    cr_assert(strstr(gpool_last_error(), "own"), "%s", gpool_last_error());
    /* not a gpool handle */
    bad = h;
    bad.magic = 0x12345678;
    cr_assert_eq(gpool_import_block(pool, &bad, &q), GPOOL_ERR_INVALID_ARG);
    cr_assert(strstr(gpool_last_error(), "not a gpool IPC handle"), "%s", gpool_last_error());
    /* one byte changed */
    bad = h;
    bad.block_size ^= 4096;
    cr_assert_eq(gpool_import_block(pool, &bad, &q), GPOOL_ERR_INVALID_ARG);
    cr_assert(strstr(gpool_last_error(), "forged"), "%s", gpool_last_error());
    /* a well-formed handle of a process that does not exist */
    bad = h;
    bad.pid = 0x7ffffff0;
    bad.check = 0;
    {
        /* recompute the checksum as a forger would */
        gpool_ipc_handle t = bad;
        t.check = 0;
        const unsigned char *b = (const unsigned char *)&t;
        uint32_t x = 2166136261u;
        for (size_t i = 0; i < sizeof t; i++)
            x = (x ^ b[i]) * 16777619u;
        bad.check = x;
    }
    cr_assert_eq(gpool_import_block(pool, &bad, &q), GPOOL_ERR_INVALID_POINTER, "%s",
                 gpool_last_error());
    cr_assert(strstr(gpool_last_error(), "stale"), "%s", gpool_last_error());
    /* not an import */
    cr_assert_eq(gpool_close_imported(pool, p), GPOOL_ERR_INVALID_POINTER);
    S->get_live(&after);
    cr_assert_eq(after.mappings, before.mappings);
    cr_assert_eq(after.reservations, before.reservations);
    cr_assert_null(q);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* ---------- two processes ---------- */

Test(ipc, importer_reads_what_the_exporter_wrote, .init = init)
{
    child c = spawn(importer);
    gpool_t *pool = exporter_pool();
    size_t sizes[] = {1000, 3 * MiB, 9 * MiB + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p;
        cr_assert_eq(gpool_alloc(pool, sizes[i], NULL, &p), GPOOL_OK);
        fill_pattern(p, sizes[i], (uint32_t)i + 7);
        msg m = {.check_bytes = sizes[i] - 100, .seed = (uint32_t)i + 7, .op = 0};
        /* an interior pointer: the importer gets the same offset */
        fill_pattern((char *)p + 100, sizes[i] - 100, (uint32_t)i + 7);
        cr_assert_eq(gpool_export_block(pool, (char *)p + 100, &m.h), GPOOL_OK, "%s",
                     gpool_last_error());
        cr_assert_eq(m.h.offset, 100);
        cr_assert_eq(write_full(c.to, &m, sizeof m), 0);
        int32_t ok = 0;
        cr_assert_eq(read_full(c.from, &ok, sizeof ok), 0, "the importer died");
        cr_assert(ok, "the importer read other bytes (size %zu)", sizes[i]);
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    }
    {
        int crc = child_wait(&c);
        cr_assert_eq(crc, 0, "the importer exited %d", crc);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(ipc, owner_free_while_imported_defers_reuse_until_close, .init = init)
{
    child c = spawn(importer);
    gpool_t *pool = exporter_pool();
    void *q;
    void *p = send_block(&c, pool, 4 * MiB, 42, 1);
    int32_t ok = 0;
    /* the owner frees while the importer has it open: deferred */
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(block_live(pool, p), "the block was freed while another process has it open");
    /* new blocks do not take its memory, and writing them does not reach the importer */
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &q), GPOOL_OK);
    cr_assert_neq(q, p);
    fill_pattern(q, 4 * MiB, 99);
    cr_assert_eq(write_full(c.to, "g", 1), 0);
    cr_assert_eq(read_full(c.from, &ok, sizeof ok), 0);
    cr_assert(ok, "the importer saw its block change under it");
    cr_assert(wait_freed(pool, p), "the block was not freed after the last importer closed");
    cr_assert_eq(gpool_free(pool, q), GPOOL_OK);
    {
        int crc = child_wait(&c);
        cr_assert_eq(crc, 0, "the importer exited %d", crc);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(ipc, importer_that_dies_leaks_nothing_in_the_owner, .init = init)
{
    child c = spawn(importer);
    gpool_t *pool = exporter_pool();
    void *p = send_block(&c, pool, 2 * MiB, 5, 2);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    {
        int crc = child_wait(&c);
        cr_assert_eq(crc, 0, "the importer exited %d", crc);
    } /* exited with the block open */
    cr_assert(wait_freed(pool, p), "the dead importer's block stays allocated");
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK); /* no live blocks left */
}

Test(ipc, stale_handle_after_the_owner_freed_the_block, .init = init)
{
    child c = spawn(importer);
    gpool_t *pool = exporter_pool();
    void *p;
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &p), GPOOL_OK);
    msg m = {.op = 3};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(write_full(c.to, &m, sizeof m), 0);
    int32_t st = -1;
    cr_assert_eq(read_full(c.from, &st, sizeof st), 0);
    cr_assert_eq(st, GPOOL_ERR_INVALID_POINTER);
    /* a forged secret for a live export */
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &p), GPOOL_OK);
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK);
    m.h.secret ^= 1;
    m.h.check = 0;
    {
        gpool_ipc_handle t = m.h;
        const unsigned char *b = (const unsigned char *)&t;
        uint32_t x = 2166136261u;
        for (size_t i = 0; i < sizeof t; i++)
            x = (x ^ b[i]) * 16777619u;
        m.h.check = x;
    }
    cr_assert_eq(write_full(c.to, &m, sizeof m), 0);
    cr_assert_eq(read_full(c.from, &st, sizeof st), 0);
    cr_assert_eq(st, GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    {
        int crc = child_wait(&c);
        cr_assert_eq(crc, 0, "the importer exited %d", crc);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(ipc, many_blocks_many_importers, .init = init)
{
    enum { NCHILD = 3, NBLOCK = 8 };
    child c[NCHILD];
    for (int k = 0; k < NCHILD; k++)
        c[k] = spawn(importer);
    gpool_t *pool = exporter_pool();
    void *p[NBLOCK];
    size_t sz[NBLOCK];
    for (int i = 0; i < NBLOCK; i++) {
        sz[i] = i % 3 == 0 ? (size_t)(512 + 64 * i) : (size_t)(i + 1) * MiB + 777;
        cr_assert_eq(gpool_alloc(pool, sz[i], NULL, &p[i]), GPOOL_OK);
        fill_pattern(p[i], sz[i], 100 + (uint32_t)i);
    }
    for (int i = 0; i < NBLOCK; i++) {
        msg m = {.check_bytes = sz[i], .seed = 100 + (uint32_t)i, .op = 1};
        cr_assert_eq(gpool_export_block(pool, p[i], &m.h), GPOOL_OK, "%s", gpool_last_error());
        for (int k = 0; k < NCHILD; k++)
            cr_assert_eq(write_full(c[k].to, &m, sizeof m), 0);
        for (int k = 0; k < NCHILD; k++) {
            int32_t ok = 0;
            cr_assert_eq(read_full(c[k].from, &ok, sizeof ok), 0);
            cr_assert(ok, "importer %d, block %d", k, i);
        }
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK); /* deferred: 3 importers */
        for (int k = 0; k < NCHILD; k++) {
            int32_t ok = 0;
            cr_assert(block_live(pool, p[i]));
            cr_assert_eq(write_full(c[k].to, "g", 1), 0);
            cr_assert_eq(read_full(c[k].from, &ok, sizeof ok), 0);
            cr_assert(ok, "importer %d, block %d after the owner's free", k, i);
        }
        cr_assert(wait_freed(pool, p[i]));
    }
    for (int k = 0; k < NCHILD; k++)
        cr_assert_eq(child_wait(&c[k]), 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* An importer that forks after importing: its child's copy of the connection must not keep the
 * block open after the importer closed it (ipc_fork.c closes the child's copies). */
Test(ipc, a_child_forked_by_the_importer_does_not_hold_the_block, .init = init)
{
    child c = spawn(importer);
    gpool_t *pool = exporter_pool();
    void *p = send_block(&c, pool, 2 * MiB, 17, 4);
    int32_t ok = 0;
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(block_live(pool, p));
    cr_assert_eq(write_full(c.to, "g", 1), 0);
    cr_assert_eq(read_full(c.from, &ok, sizeof ok), 0);
    cr_assert(ok);
    /* the importer closed it; its child (asleep for 3 s) must not count */
    cr_assert(wait_freed_ms(pool, p, 1500), "the importer's child keeps the block open");
    {
        int crc = child_wait(&c);
        cr_assert_eq(crc, 0, "the importer exited %d", crc);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}
