/* test_ipc_adversarial.c — an outsider's two-process checks of the C API's IPC promises
 * (include/gpool.h "Sharing blocks with other processes", docs/ipc.md), written from the
 * contract rather than from the implementation: the owner freeing a block twice while another
 * process has it open, the same handle opened twice in one process, closes of what is not (or
 * no longer) open, a handle whose exporting pool is gone, many threads importing at once, a
 * small block inside a slab, and the resources both processes hold afterwards (descriptors,
 * threads, bytes in use: back to the baseline).
 *
 * The importer is forked before any pool exists (a child forked after CUDA initialised cannot
 * use the parent's context); commands and answers travel over two pipes. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

enum {
    OP_HOLD = 1, /* import, check, answer; on a byte: check again, answer, close, answer */
    OP_TWICE,    /* the same handle imported twice, closes in every order: answer 1 */
    OP_STATUS,   /* import: answer the status (closed at once if it worked) */
    OP_THREADS,  /* 8 threads, each 10 x import, check, close: answer 1 */
    OP_BASELINE, /* answer 1 when descriptors and threads are what they were at start */
};

typedef struct cmd {
    gpool_ipc_handle h;
    uint64_t bytes;
    uint32_t seed, op;
} cmd;

static int io_full(int fd, void *buf, size_t n, int writing)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = writing ? write(fd, (char *)buf + done, n - done)
                            : read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    size_t n = 0;
    if (!d) return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static size_t fds_open(void)
{
    return count_dir("/proc/self/fd");
}

static size_t threads_running(void)
{
    return count_dir("/proc/self/task");
}

/* ---------- the importing process ---------- */

typedef struct thread_job {
    gpool_t *pool;
    const cmd *c;
    int ok;
} thread_job;

static void *import_loop(void *arg)
{
    thread_job *j = arg;
    j->ok = 1;
    for (int i = 0; i < 10 && j->ok; i++) {
        void *p = NULL;
        if (gpool_import_block(j->pool, &j->c->h, &p) != GPOOL_OK) {
            fprintf(stderr, "importer thread: %s\n", gpool_last_error());
            j->ok = 0;
            break;
        }
        j->ok = check_pattern(p, j->c->bytes, j->c->seed);
        if (gpool_close_imported(j->pool, p) != GPOOL_OK) j->ok = 0;
    }
    return NULL;
}

static int32_t import_twice(gpool_t *pool, const cmd *c)
{
    void *a = NULL, *b = NULL;
    if (gpool_import_block(pool, &c->h, &a) != GPOOL_OK) return 0;
    if (gpool_import_block(pool, &c->h, &b) != GPOOL_OK) return 0;
    if (!check_pattern(a, c->bytes, c->seed) || !check_pattern(b, c->bytes, c->seed)) return 0;
    /* one close leaves the other open import readable */
    if (gpool_close_imported(pool, a) != GPOOL_OK) return 0;
    if (!check_pattern(b, c->bytes, c->seed)) return 0;
    if (gpool_close_imported(pool, b) != GPOOL_OK) return 0;
    /* a third close, and a close of an address never imported, are refused */
    if (a != b && gpool_close_imported(pool, a) != GPOOL_ERR_INVALID_POINTER) return 0;
    if (gpool_close_imported(pool, b) != GPOOL_ERR_INVALID_POINTER) return 0;
    if (gpool_close_imported(pool, (char *)b + 64) != GPOOL_ERR_INVALID_POINTER) return 0;
    return 1;
}

static int importer(int in, int out)
{
    size_t fds0 = fds_open(), threads0 = threads_running();
    gpool_t *pool = test_pool(NULL);
    if (!pool) return 90;
    cmd c;
    while (io_full(in, &c, sizeof c, 0) == 0) {
        int32_t ans = 0;
        void *p = NULL;
        if (c.op == OP_HOLD) {
            if (gpool_import_block(pool, &c.h, &p) != GPOOL_OK) {
                fprintf(stderr, "importer: %s\n", gpool_last_error());
                return 91;
            }
            ans = check_pattern(p, c.bytes, c.seed);
            char go;
            if (io_full(out, &ans, sizeof ans, 1) || io_full(in, &go, 1, 0)) return 92;
            ans = check_pattern(p, c.bytes, c.seed);
            if (io_full(out, &ans, sizeof ans, 1)) return 93;
            ans = gpool_close_imported(pool, p) == GPOOL_OK;
        } else if (c.op == OP_TWICE) {
            ans = import_twice(pool, &c);
        } else if (c.op == OP_STATUS) {
            ans = gpool_import_block(pool, &c.h, &p);
            if (ans == GPOOL_OK) gpool_close_imported(pool, p);
        } else if (c.op == OP_THREADS) {
            thread_job jobs[8];
            pthread_t t[8];
            for (int i = 0; i < 8; i++) {
                jobs[i] = (thread_job){.pool = pool, .c = &c};
                if (pthread_create(&t[i], NULL, import_loop, &jobs[i]) != 0) return 94;
            }
            ans = 1;
            for (int i = 0; i < 8; i++) {
                pthread_join(t[i], NULL);
                ans = ans && jobs[i].ok;
            }
        } else if (c.op == OP_BASELINE) {
            if (gpool_destroy(pool) != GPOOL_OK) return 95;
            pool = NULL;
            ans = fds_open() == fds0 && threads_running() == threads0;
            if (!ans)
                fprintf(stderr, "importer: %zu descriptors (%zu before), %zu threads (%zu)\n",
                        fds_open(), fds0, threads_running(), threads0);
        }
        if (io_full(out, &ans, sizeof ans, 1)) return 96;
    }
    if (pool) gpool_destroy(pool);
    return 0;
}

/* ---------- the exporting process (the test) ---------- */

typedef struct peer {
    pid_t pid;
    int to, from;
} peer;

static peer start_importer(void)
{
    int a[2], b[2];
    cr_assert(pipe(a) == 0 && pipe(b) == 0);
    peer c = {.pid = fork()};
    cr_assert(c.pid >= 0);
    if (c.pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != a[0] && fd != b[1]) close(fd);
        _exit(importer(a[0], b[1]));
    }
    close(a[0]);
    close(b[1]);
    c.to = a[1];
    c.from = b[0];
    return c;
}

static int32_t ask(peer *c, const cmd *m)
{
    int32_t ans = -1000;
    cr_assert_eq(io_full(c->to, (void *)m, sizeof *m, 1), 0, "the importer is gone");
    cr_assert_eq(io_full(c->from, &ans, sizeof ans, 0), 0, "the importer died");
    return ans;
}

static int32_t answer(peer *c)
{
    int32_t ans = -1000;
    cr_assert_eq(io_full(c->from, &ans, sizeof ans, 0), 0, "the importer died");
    return ans;
}

static void finish(peer *c)
{
    close(c->to);
    close(c->from);
    int status = 0;
    cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer ended with %d",
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static gpool_t *ipc_pool(void)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_config_parse(&cfg, "ipc=1"), GPOOL_OK);
    gpool_status st = gpool_create(&cfg, &pool);
    if (st == GPOOL_ERR_UNSUPPORTED && strstr(gpool_last_error(), "POSIX file descriptors"))
        cr_skip_test("the simulator cannot export memory: %s", gpool_last_error());
    cr_assert_eq(st, GPOOL_OK, "%s", gpool_last_error());
    return pool;
}

static gpool_t *ipc_pool_conf(const char *conf)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_config_parse(&cfg, conf), GPOOL_OK, "%s", gpool_last_error());
    gpool_status st = gpool_create(&cfg, &pool);
    if (st == GPOOL_ERR_UNSUPPORTED && strstr(gpool_last_error(), "POSIX file descriptors"))
        cr_skip_test("the simulator cannot export memory: %s", gpool_last_error());
    cr_assert_eq(st, GPOOL_OK, "%s", gpool_last_error());
    return pool;
}

static size_t in_use(gpool_t *pool)
{
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    return s.kind[GPOOL_MEM_DEVICE].in_use_bytes;
}

static int live(gpool_t *pool, void *p)
{
    size_t sz;
    return gpool_block_size(pool, p, &sz) == GPOOL_OK;
}

/* Wait up to 5 s for the bytes in use to come back to want (the helper thread's free). */
static int in_use_reaches(gpool_t *pool, size_t want)
{
    for (int i = 0; i < 500 && in_use(pool) != want; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    return in_use(pool) == want;
}

static void init(void)
{
    NEED_SIM();
    NEED_HOST_VIDMEM();
    signal(SIGPIPE, SIG_IGN);
}

/* gpool_free's contract: a block freed while imported stays until the last close. A second
 * free of it by the owner (a double free, refused without IPC) must not free it for real:
 * else its memory goes to a new block while the importer still reads it, and the deferred
 * free later frees whatever block took the address. */
Test(ipc_adversarial, double_free_while_imported_frees_nothing_twice, .init = init)
{
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    size_t base = in_use(pool);
    void *p, *q;
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_OK);
    fill_pattern(p, 4 * MiB, 5);
    cmd m = {.bytes = 4 * MiB, .seed = 5, .op = OP_HOLD};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(ask(&c, &m), 1);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);                  /* deferred */
    cr_assert_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER); /* the owner's mistake */
    cr_assert(live(pool, p), "a second free freed a block another process has open");
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &q), GPOOL_OK);
    cr_assert_neq(q, p, "a block another process has open was handed out again");
    fill_pattern(q, 4 * MiB, 77);
    cr_assert_eq(io_full(c.to, "g", 1, 1), 0);
    cr_assert_eq(answer(&c), 1, "the importer's bytes changed under it");
    cr_assert_eq(answer(&c), 1, "the importer could not close");
    /* the last close frees p once: q, which may sit anywhere, stays */
    size_t qsz = 0;
    cr_assert_eq(gpool_block_size(pool, q, &qsz), GPOOL_OK, "the deferred free freed q");
    cr_assert(in_use_reaches(pool, base + qsz), "in use %zu, want %zu", in_use(pool), base + qsz);
    cr_assert(live(pool, q), "the deferred free freed another block");
    cr_assert(check_pattern(q, 4 * MiB, 77));
    cr_assert_eq(gpool_free(pool, q), GPOOL_OK);
    cr_assert_eq(in_use(pool), base);
    finish(&c);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* CUDA maps an IPC handle once per context and counts opens; gpool may give two mappings,
 * but each open must be readable until its own close, and closes past the opens fail. */
Test(ipc_adversarial, same_handle_opened_twice_closed_in_turn, .init = init)
{
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    void *p;
    cr_assert_eq(gpool_alloc(pool, 3 * MiB, NULL, &p), GPOOL_OK);
    fill_pattern((char *)p + 4096, 3 * MiB - 4096, 11);
    cmd m = {.bytes = 3 * MiB - 4096, .seed = 11, .op = OP_TWICE};
    /* a pointer in the middle of the block: the importer gets the same offset */
    cr_assert_eq(gpool_export_block(pool, (char *)p + 4096, &m.h), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(m.h.offset, 4096);
    cr_assert_eq(ask(&c, &m), 1);
    size_t psz = 0;
    cr_assert_eq(gpool_block_size(pool, p, &psz), GPOOL_OK);
    size_t base = in_use(pool) - psz;
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    /* the importer's last close reaches the exporter's helper thread asynchronously: the free
     * may be deferred for that long */
    cr_assert(in_use_reaches(pool, base), "the block stayed after every open was closed");
    finish(&c);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A small block (inside a slab of a shared page): the importer reads it, the owner's other
 * small blocks live on, and after the close and the free the bytes in use are the baseline. */
Test(ipc_adversarial, small_block_in_a_slab_round_trip, .init = init)
{
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    size_t base = in_use(pool);
    void *neighbour, *p;
    cr_assert_eq(gpool_alloc(pool, 1000, NULL, &neighbour), GPOOL_OK);
    cr_assert_eq(gpool_alloc(pool, 1000, NULL, &p), GPOOL_OK);
    fill_pattern(neighbour, 1000, 2);
    fill_pattern(p, 1000, 3);
    cmd m = {.bytes = 1000, .seed = 3, .op = OP_HOLD};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(ask(&c, &m), 1);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(live(pool, p));
    cr_assert_eq(io_full(c.to, "g", 1, 1), 0);
    cr_assert_eq(answer(&c), 1);
    cr_assert_eq(answer(&c), 1);
    size_t nsz = 0;
    cr_assert_eq(gpool_block_size(pool, neighbour, &nsz), GPOOL_OK);
    cr_assert(in_use_reaches(pool, base + nsz), "in use %zu, want %zu", in_use(pool), base + nsz);
    cr_assert(check_pattern(neighbour, 1000, 2));
    cr_assert_eq(gpool_free(pool, neighbour), GPOOL_OK);
    cr_assert_eq(in_use(pool), base);
    finish(&c);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A handle whose exporting pool was destroyed is stale; nothing stays mapped in the importer
 * (its descriptors and threads are back to the baseline after its pool goes). */
Test(ipc_adversarial, handle_of_a_destroyed_pool_is_stale, .init = init)
{
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    void *p;
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &p), GPOOL_OK);
    cmd m = {.bytes = 0, .op = OP_STATUS};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(ask(&c, &m), GPOOL_ERR_INVALID_POINTER);
    cmd b = {.op = OP_BASELINE};
    cr_assert_eq(ask(&c, &b), 1, "the importer kept descriptors or threads");
    finish(&c);
}

/* Eight importer threads open and close one block 10 times each, at once; afterwards the
 * exporter's descriptors and threads are its baseline once the pool is destroyed. */
Test(ipc_adversarial, threads_import_concurrently_and_nothing_leaks, .init = init)
{
    peer c = start_importer();
    /* the simulator's own descriptors (its device memory) come with the first pool */
    cr_assert_eq(gpool_destroy(ipc_pool()), GPOOL_OK);
    size_t fds0 = fds_open(), threads0 = threads_running();
    gpool_t *pool = ipc_pool();
    size_t base = in_use(pool);
    void *p;
    cr_assert_eq(gpool_alloc(pool, 6 * MiB + 4321, NULL, &p), GPOOL_OK);
    fill_pattern(p, 6 * MiB + 4321, 9);
    cmd m = {.bytes = 6 * MiB + 4321, .seed = 9, .op = OP_THREADS};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(ask(&c, &m), 1, "an importer thread failed");
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(in_use_reaches(pool, base));
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(fds_open(), fds0, "the exporter kept descriptors");
    for (int i = 0; i < 100 && threads_running() != threads0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    cr_assert_eq(threads_running(), threads0, "the helper thread outlived its pool");
    cmd b = {.op = OP_BASELINE};
    cr_assert_eq(ask(&c, &b), 1, "the importer kept descriptors or threads");
    finish(&c);
}

/* A huge block over several physical handles (pages made one by one, then gathered under a
 * budget): the importer reads every byte, and the owner's handles, mappings and reservations
 * are all given back after the close, the free and the pool's destruction. (More than one
 * message of descriptors, > 200 handles, was not reached: growth makes handles of 32 MiB.) */
Test(ipc_adversarial, huge_block_over_many_physical_handles, .init = init)
{
    peer c = start_importer();
    const struct sim_api *S = sim_api();
    struct gpoolsim_live before, during, after;
    S->get_live(&before);
    /* 240 pages made one by one, freed, then gathered into one block (the budget leaves no
     * room for new pages) */
    gpool_t *pool = ipc_pool_conf("ipc=1,budget_device=480M");
    enum { PAGES = 240 };
    static void *pages[PAGES];
    for (int i = 0; i < PAGES; i++)
        cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &pages[i]), GPOOL_OK, "%s",
                     gpool_last_error());
    for (int i = 0; i < PAGES; i++)
        cr_assert_eq(gpool_free(pool, pages[i]), GPOOL_OK);
    size_t n = 478 * MiB + 4097;
    void *p;
    cr_assert_eq(gpool_alloc(pool, n, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    S->get_live(&during);
    cr_assert_geq(during.handles - before.handles, 8, "only %zu physical handles",
                  during.handles - before.handles);
    fill_pattern(p, n, 31);
    cmd m = {.bytes = n, .seed = 31, .op = OP_HOLD};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(ask(&c, &m), 1, "the importer read other bytes");
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(live(pool, p));
    cr_assert_eq(io_full(c.to, "g", 1, 1), 0);
    cr_assert_eq(answer(&c), 1);
    cr_assert_eq(answer(&c), 1);
    cr_assert(in_use_reaches(pool, 0), "in use %zu after the last close", in_use(pool));
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    S->get_live(&after);
    cr_assert_eq(after.handles, before.handles);
    cr_assert_eq(after.mappings, before.mappings);
    cr_assert_eq(after.reservations, before.reservations);
    finish(&c);
}

/* The simulator's exportable memory is a memfd ("gpoolsim-ipc"): the descriptors of it this
 * process has open, into fds (at most max); returns how many. */
static size_t memfds(int *fds, size_t max)
{
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0) continue;
        link[k] = '\0';
        if (strstr(link, "gpoolsim-ipc") && n < max) fds[n++] = atoi(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

/* A child forked by the exporter (a data-loader worker, say) must not keep the exported
 * pages' descriptors: they would hold the physical memory after the owner freed the block,
 * for as long as the child runs. docs/ipc.md: "a child forked by an exporter does not keep
 * its socket (the child cannot use its parent's pools anyway)". The exported descriptors are
 * close-on-exec too (the real driver's need not be). */
Test(ipc_adversarial, child_of_the_exporter_keeps_no_exported_descriptor, .init = init)
{
    /* valgrind's own descriptors are counted in the child, and its leak check fails a forked
     * child for the parent's thread-owned buffers */
    NOT_UNDER_VALGRIND("the child's descriptors include valgrind's");
    gpool_t *pool = ipc_pool();
    void *p;
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_OK);
    int before[64], after[64], fresh[64];
    size_t nb = memfds(before, 64);
    gpool_ipc_handle h;
    cr_assert_eq(gpool_export_block(pool, p, &h), GPOOL_OK, "%s", gpool_last_error());
    size_t na = memfds(after, 64), nf = 0;
    for (size_t i = 0; i < na; i++) {
        int old = 0;
        for (size_t k = 0; k < nb; k++)
            old |= after[i] == before[k];
        if (!old) fresh[nf++] = after[i];
    }
    cr_assert_geq(nf, 1, "the export opened no descriptor");
    for (size_t i = 0; i < nf; i++)
        cr_assert(fcntl(fresh[i], F_GETFD) & FD_CLOEXEC, "exported descriptor %d survives exec",
                  fresh[i]);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int open_in_child = 0;
        for (size_t i = 0; i < nf; i++)
            open_in_child += fcntl(fresh[i], F_GETFD) != -1;
        _exit(open_in_child);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "the child kept %d exported descriptors",
                 WEXITSTATUS(status));
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* gpool_free_async's and gpool_stream_release's contracts: the block may still be used by work
 * queued on the stream it was freed on, and a stream may be destroyed once released, with work
 * queued (cuStreamDestroy's doc: the work completes). A block freed on a stream while another
 * process has it open is freed later, by the pool's helper thread, after the stream was released
 * and destroyed and its handle given to a new stream (GPOOL_SIM_REUSE_STREAM_HANDLES=1, as real
 * drivers do): that free must still wait for the old stream's work, so the new stream may not take
 * the memory while the kernel queued before the destroy still writes it. */
Test(ipc_adversarial, deferred_free_waits_for_a_destroyed_streams_work, .init = init)
{
    setenv("GPOOL_SIM_REUSE_STREAM_HANDLES", "1", 1);
    const struct sim_api *sim = sim_api();
    cr_assert_not_null(sim);
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    CUcontext ctx;
    CUstream s, s2;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(mk(&s, 1), CUDA_SUCCESS);
    size_t base = in_use(pool);
    void *p, *q;
    gpool_alloc_params prm = {0};
    cr_assert_eq(gpool_alloc_async(pool, 4 * MiB, &prm, s, &p), GPOOL_OK, "%s", gpool_last_error());
    fill_pattern(p, 4 * MiB, 29);
    cmd m = {.bytes = 4 * MiB, .seed = 29, .op = OP_HOLD};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(ask(&c, &m), 1);
    /* a kernel on s writes the block and is still running */
    cr_assert_eq(sim->stream_hold(s), 0);
    cr_assert_eq(sim->touch(s, (CUdeviceptr)p, 4 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK); /* deferred: open elsewhere */
    cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(s), CUDA_SUCCESS);
    cr_assert_eq(mk(&s2, 1), CUDA_SUCCESS);
    cr_assert_eq(s2, s, "the simulator gives the destroyed stream's handle again");
    cr_assert_eq(io_full(c.to, "g", 1, 1), 0);
    cr_assert_eq(answer(&c), 1);
    cr_assert_eq(answer(&c), 1); /* closed: the deferred free runs on the helper thread */
    cr_assert(in_use_reaches(pool, base), "the deferred free did not happen: in use %zu, want %zu",
              in_use(pool), base);
    unsigned long v0 = sim->violations();
    cr_assert_eq(gpool_alloc_async(pool, 4 * MiB, &prm, s2, &q), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(sim->touch(s2, (CUdeviceptr)q, 4 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(sim->violations(), v0,
                 "the deferred free let a new stream reuse memory the old one's kernel writes");
    cr_assert_eq(gpool_free_async(pool, q, s2), GPOOL_OK);
    cr_assert_eq(gpool_stream_release(pool, s2), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(s2), CUDA_SUCCESS);
    finish(&c);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    release(0);
}

/* An exporting process: a block with pattern 23, its handle sent, then (on a byte) the pool
 * destroyed with the block still open elsewhere, and the process exits. */
static int exporter_that_exits(int in, int out)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_t *pool = NULL;
    if (gpool_config_parse(&cfg, "ipc=1") != GPOOL_OK || gpool_create(&cfg, &pool) != GPOOL_OK)
        return 80;
    void *p;
    gpool_ipc_handle h;
    if (gpool_alloc(pool, 4 * MiB, NULL, &p) != GPOOL_OK) return 81;
    fill_pattern(p, 4 * MiB, 23);
    if (gpool_export_block(pool, p, &h) != GPOOL_OK) return 82;
    char go;
    if (io_full(out, &h, sizeof h, 1) || io_full(in, &go, 1, 0)) return 83;
    if (gpool_free(pool, p) != GPOOL_OK) return 84; /* deferred: open in the test process */
    if (gpool_destroy(pool) != GPOOL_OK) return 85;
    return 0;
}

/* docs/ipc.md: "An importer that maps memory keeps that physical memory alive in the driver
 * even if the exporting process exits": the bytes stay readable, the close works, and a new
 * import of the handle is stale. */
Test(ipc_adversarial, import_outlives_the_exporting_process, .init = init)
{
    int a[2], b[2];
    cr_assert(pipe(a) == 0 && pipe(b) == 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != a[0] && fd != b[1]) close(fd);
        _exit(exporter_that_exits(a[0], b[1]));
    }
    close(a[0]);
    close(b[1]);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_ipc_handle h;
    cr_assert_eq(io_full(b[0], &h, sizeof h, 0), 0, "the exporter died");
    void *q = NULL, *q2 = NULL;
    cr_assert_eq(gpool_import_block(pool, &h, &q), GPOOL_OK, "%s", gpool_last_error());
    cr_assert(check_pattern(q, 4 * MiB, 23));
    cr_assert_eq(io_full(a[1], "g", 1, 1), 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the exporter ended with %d",
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    cr_assert(check_pattern(q, 4 * MiB, 23), "the bytes went with the exporting process");
    cr_assert_eq(gpool_import_block(pool, &h, &q2) == GPOOL_OK && q2 != q, 0,
                 "a new mapping of a gone process's block");
    cr_assert_eq(gpool_close_imported(pool, q), GPOOL_OK, "%s", gpool_last_error());
    if (q2 == q) cr_assert_eq(gpool_close_imported(pool, q), GPOOL_OK);
    close(a[1]);
    close(b[0]);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A connection to the exporter's socket (the name docs/ipc.md gives) that never speaks: other
 * importers must not wait for it. */
static int silent_connection(const gpool_ipc_handle *h)
{
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    int n = snprintf(sun.sun_path + 1, sizeof sun.sun_path - 1, "gpool-ipc-%u-%016llx",
                     (unsigned)h->pid, (unsigned long long)h->token);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sun,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
                 0, "no exporter socket: %s", strerror(errno));
    return fd;
}

/* One silent connection (a stuck or hostile process of the same user) must not hold up the
 * imports of everyone else. */
Test(ipc_adversarial, a_silent_connection_does_not_stall_other_importers, .init = init)
{
    peer c = start_importer();
    gpool_t *pool = ipc_pool();
    void *p;
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &p), GPOOL_OK);
    fill_pattern(p, 2 * MiB, 4);
    cmd m = {.bytes = 2 * MiB, .seed = 4, .op = OP_HOLD};
    cr_assert_eq(gpool_export_block(pool, p, &m.h), GPOOL_OK, "%s", gpool_last_error());
    int silent = silent_connection(&m.h);
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL); /* the helper takes it first */
    double t = now_s();
    cr_assert_eq(ask(&c, &m), 1);
    double took = now_s() - t;
    cr_assert_eq(io_full(c.to, "g", 1, 1), 0);
    cr_assert_eq(answer(&c), 1);
    cr_assert_eq(answer(&c), 1);
    close(silent);
    cr_assert_lt(took, 0.5, "the import waited %.2f s behind a silent connection", took);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    finish(&c);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* Two pools of one process: the second may import the first's block (only the pool's own
 * export is refused); the owner's free waits for that import's close like any other. */
Test(ipc_adversarial, another_pool_of_the_same_process_imports, .init = init)
{
    gpool_t *owner = ipc_pool(), *other = test_pool(NULL);
    cr_assert_not_null(other);
    size_t base = in_use(owner);
    void *p, *q = NULL;
    cr_assert_eq(gpool_alloc(owner, 5 * MiB, NULL, &p), GPOOL_OK);
    fill_pattern(p, 5 * MiB, 61);
    gpool_ipc_handle h;
    cr_assert_eq(gpool_export_block(owner, p, &h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_import_block(owner, &h, &q), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_import_block(other, &h, &q), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_neq(q, p);
    cr_assert(check_pattern(q, 5 * MiB, 61));
    cr_assert_eq(gpool_free(owner, p), GPOOL_OK);
    cr_assert(live(owner, p), "freed while another pool has it open");
    cr_assert(check_pattern(q, 5 * MiB, 61));
    cr_assert_eq(gpool_close_imported(other, q), GPOOL_OK, "%s", gpool_last_error());
    cr_assert(in_use_reaches(owner, base), "in use %zu, want %zu", in_use(owner), base);
    cr_assert_eq(gpool_destroy(other), GPOOL_OK);
    cr_assert_eq(gpool_destroy(owner), GPOOL_OK);
}
