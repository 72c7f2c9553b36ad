/* make install into a temporary prefix, then build and run an outside program the way a user
 * would: `pkg-config --cflags --libs gpool` against the staged tree (PKG_CONFIG_PATH and
 * PKG_CONFIG_SYSROOT_DIR point into it), shared and static, on the simulated driver
 * ($GPOOL_LIBCUDA, set by make test). Then make uninstall leaves no file behind, removes the
 * folders install made once they are empty, and keeps a folder holding a file not its own.
 * The install re-runs make with this test run's build directory, compiler and flags
 * ($GPOOL_TEST_BUILD, $GPOOL_TEST_CC, $GPOOL_TEST_SAN, $GPOOL_TEST_OPT, exported by make test);
 * the current directory must be the repository root. On a real GPU (GPOOL_TEST_REAL_GPU=1) it
 * skips: the outside program runs on the simulated driver.
 * The installed tree is complete: the installed gpool-bench runs `info` and `hotpath --dropin`
 * with nothing from the build tree (the simulated driver and the drop-in client lie in
 * $LIBDIR/gpool/), and README.md's example (the ```c block after the "compiled by
 * tests/test_install.c" mark) builds with `pkg-config --cflags --libs gpool` -lcuda and runs. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpool.h"
#include "util_skip.h"

/* The outside program: a user's first gpool program. */
static const char probe_src[] =
    "#include <gpool.h>\n"
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "int main(void) {\n"
    "    char want[32];\n"
    "    snprintf(want, sizeof want, \"%d.%d.%d\", GPOOL_VERSION_MAJOR, GPOOL_VERSION_MINOR,\n"
    "             GPOOL_VERSION_PATCH);\n"
    "    if (strcmp(gpool_version(), want) != 0) return 2;\n"
    "    gpool_t *pool;\n"
    "    void *block;\n"
    "    if (gpool_create(NULL, &pool) != GPOOL_OK ||\n"
    "        gpool_alloc(pool, 3 << 20, NULL, &block) != GPOOL_OK) {\n"
    "        fprintf(stderr, \"probe: %s\\n\", gpool_last_error());\n"
    "        return 1;\n"
    "    }\n"
    "    gpool_free(pool, block);\n"
    "    if (gpool_destroy(pool) != GPOOL_OK) return 3;\n"
    "    printf(\"probe: gpool %s works\\n\", gpool_version());\n"
    "    return 0;\n"
    "}\n";

/* The steps, as a user would type them. $1 repo root, $2 staging dir; the environment has the
 * make variables BUILD, CC, SAN, OPT of this test run. */
static const char script[] =
    "set -eu\n"
    "root=$1 stage=$2 work=$(dirname \"$2\")\n"
    "unset MAKEFLAGS MFLAGS MAKELEVEL\n"
    "# install what make test built; remake nothing (others may be editing src/ meanwhile)\n"
    "noremake=\"-o lib -o $BUILD/gpool-bench -o $BUILD/libgpool_preload.so -o "
    "$BUILD/sim/libcuda.so.1\"\n"
    "echo '== make install'\n"
    "make -s -C \"$root\" install $noremake DESTDIR=\"$stage\" PREFIX=/usr BUILD=\"$BUILD\" "
    "CC=\"$CC\" "
    "SAN=\"$SAN\" OPT=\"$OPT\"\n"
    "export PKG_CONFIG_PATH=$stage/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage\n"
    "echo \"== pkg-config: $(pkg-config --modversion gpool)\"\n"
    "test \"$(pkg-config --modversion gpool)\" = \"$GPOOL_EXPECT_VERSION\"\n"
    "echo \"   cflags/libs: $(pkg-config --cflags --libs gpool)\"\n"
    "echo \"   static:      $(pkg-config --static --libs gpool)\"\n"
    "for l in -ldl -lm -lpthread -lhwloc; do\n"
    "  pkg-config --static --libs gpool | tr ' ' '\\n' | grep -qx -- \"$l\" ||\n"
    "    { echo \"static libs lack $l\"; exit 1; }\n"
    "done\n"
    "echo '== shared build'\n"
    "$CC $SAN -o \"$work/probe\" \"$work/probe.c\" $(pkg-config --cflags --libs gpool)\n"
    "readelf -d \"$work/probe\" | grep -q \"NEEDED.*\\[libgpool.so.$GPOOL_EXPECT_MAJOR\\]\"\n"
    "LD_LIBRARY_PATH=$stage/usr/lib \"$work/probe\"\n"
    "echo '== static build'\n"
    "$CC $SAN -o \"$work/probe-static\" \"$work/probe.c\" $(pkg-config --cflags gpool) \\\n"
    "  $(pkg-config --static --libs gpool | sed 's/-lgpool\\b/-l:libgpool.a/')\n"
    "if readelf -d \"$work/probe-static\" | grep -q libgpool; then\n"
    "  echo 'static probe still needs libgpool.so'; exit 1; fi\n"
    "\"$work/probe-static\"\n"
    "echo '== the installed gpool-bench, nothing from the build tree'\n"
    "env -u GPOOL_LIBCUDA \"$stage/usr/bin/gpool-bench\" info\n"
    "# its timing goal may miss on a busy machine: what counts is that every row ran\n"
    "env -u GPOOL_LIBCUDA ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:verify_asan_link_order=0\" "
    "\"$stage/usr/bin/gpool-bench\" hotpath --dropin --pairs 200 --rounds 1 "
    ">\"$work/hotpath\" 2>&1 || true\n"
    "grep -q '100000    1 MiB' \"$work/hotpath\" && grep -q 'goal <= 4x at every row' "
    "\"$work/hotpath\" || { cat \"$work/hotpath\"; exit 1; }\n"
    "echo '== the README example, with the README line'\n"
    "awk '/compiled by tests\\/test_install.c/ {m=1} m && /^```$/ && f {exit} f {print} "
    "m && /^```c$/ {f=1}' \"$root/README.md\" > \"$work/readme_example.c\"\n"
    "grep -q gpool_create \"$work/readme_example.c\" || { echo 'no example in README.md'; exit 1; "
    "}\n"
    "# pkg-config prefixes the sysroot to cuda.h's folder too: show it the real one there\n"
    "cuda=${CUDA_HOME:-/usr/local/cuda}\n"
    "mkdir -p \"$stage$(dirname \"$cuda\")\" && ln -s \"$cuda\" \"$stage$cuda\"\n"
    "$CC $SAN -o \"$work/readme_example\" \"$work/readme_example.c\" "
    "$(pkg-config --cflags --libs gpool) -L\"$stage/usr/lib/gpool/sim\" -lcuda\n"
    "LD_LIBRARY_PATH=$stage/usr/lib:$stage/usr/lib/gpool/sim \"$work/readme_example\"\n"
    "rm \"$stage$cuda\"; d=$(dirname \"$cuda\"); while [ \"$d\" != / ]; do "
    "rmdir \"$stage$d\" 2>/dev/null || break; d=$(dirname \"$d\"); done\n"
    "echo '== make uninstall'\n"
    "touch \"$stage/usr/bin/not-ours\"\n"
    "make -s -C \"$root\" uninstall DESTDIR=\"$stage\" PREFIX=/usr BUILD=\"$BUILD\" CC=\"$CC\" "
    "SAN=\"$SAN\" OPT=\"$OPT\"\n"
    "[ -f \"$stage/usr/bin/not-ours\" ] || { echo 'uninstall removed a file not its own'; exit 1; "
    "}\n"
    "rm \"$stage/usr/bin/not-ours\"\n"
    "left=$(find \"$stage\" ! -type d)\n"
    "if [ -n \"$left\" ]; then echo \"left behind: $left\"; exit 1; fi\n"
    "for d in include lib/pkgconfig lib; do\n"
    "  if [ -d \"$stage/usr/$d\" ]; then echo \"empty folder left behind: usr/$d\"; exit 1; fi\n"
    "done\n"
    "[ -d \"$stage/usr/bin\" ] || { echo 'uninstall removed a folder that was not empty'; exit 1; "
    "}\n"
    "echo '== done'\n";

static int running_under_valgrind(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return pre && strstr(pre, "vgpreload");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static int is_file(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int link_points_to(const char *path, const char *target)
{
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n < 0) return 0;
    buf[n] = '\0';
    return strcmp(buf, target) == 0;
}

/* The build directory as make saw it: relative to the repository root when inside it. */
static const char *build_dir(const char *root)
{
    const char *build = getenv("GPOOL_TEST_BUILD");
    cr_assert_not_null(build, "GPOOL_TEST_BUILD is not set (run the tests with make test)");
    size_t rl = strlen(root);
    if (strncmp(build, root, rl) == 0 && build[rl] == '/') return build + rl + 1;
    return build;
}

/* Shell single-quoting of s into out. */
static void quote(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    out[o++] = '\'';
    for (; *s && o + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else {
            out[o++] = *s;
        }
    }
    out[o++] = '\'';
    out[o] = '\0';
}

/* The build the suite runs under (make test passes CC, SAN and OPT on), shell-quoted for the
 * make and install commands. */
struct build_args {
    char cc[256], san[512], opt[256], build[PATH_MAX + 8];
};

static void get_build_args(struct build_args *q, const char *root)
{
    const char *cc = getenv("GPOOL_TEST_CC") ? getenv("GPOOL_TEST_CC") : "cc";
    const char *san = getenv("GPOOL_TEST_SAN") ? getenv("GPOOL_TEST_SAN") : "";
    const char *opt = getenv("GPOOL_TEST_OPT") ? getenv("GPOOL_TEST_OPT") : "-O2";
    quote(q->cc, sizeof q->cc, cc);
    quote(q->san, sizeof q->san, san);
    quote(q->opt, sizeof q->opt, opt);
    quote(q->build, sizeof q->build, build_dir(root));
}

static void check_layout(const char *root);

/* One test, so that the two installs run one after the other (they share the build tree). */
Test(install, staged_install_builds_and_runs_an_outside_program, .timeout = 600)
{
    NEED_SIM();
    if (running_under_valgrind()) cr_skip_test("make, cc and pkg-config under valgrind: skipped");
    cr_assert_not_null(getenv("GPOOL_LIBCUDA"), "GPOOL_LIBCUDA must name the simulated driver");
    char root[PATH_MAX];
    cr_assert_not_null(getcwd(root, sizeof root));
    char makefile[PATH_MAX + 16];
    snprintf(makefile, sizeof makefile, "%s/pkg/pkg.mk", root);
    cr_assert(is_file(makefile), "run from the repository root (no %s)", makefile);
    check_layout(root);

    char tmpl[] = "/tmp/gpool-install-XXXXXX";
    char *work = mkdtemp(tmpl);
    cr_assert_not_null(work);
    char stage[PATH_MAX], path[PATH_MAX + 64];
    snprintf(stage, sizeof stage, "%s/stage", work);
    snprintf(path, sizeof path, "%s/probe.c", work);
    write_file(path, probe_src);
    snprintf(path, sizeof path, "%s/install.sh", work);
    write_file(path, script);

    struct build_args q;
    get_build_args(&q, root);

    char cmd[40000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && BUILD=%s CC=%s SAN=%s OPT=%s GPOOL_EXPECT_VERSION=%d.%d.%d "
             "GPOOL_EXPECT_MAJOR=%d bash '%s/install.sh' '%s' '%s' > '%s/log' 2>&1",
             root, q.build, q.cc, q.san, q.opt, GPOOL_VERSION_MAJOR, GPOOL_VERSION_MINOR,
             GPOOL_VERSION_PATCH, GPOOL_VERSION_MAJOR, work, root, stage, work);
    int rc = system(cmd);

    char log[16384] = "";
    snprintf(path, sizeof path, "%s/log", work);
    FILE *f = fopen(path, "r");
    if (f) {
        log[fread(log, 1, sizeof log - 1, f)] = '\0';
        fclose(f);
    }
    cr_assert_eq(rc, 0, "install test failed (rc %d); log:\n%s", rc, log);
    cr_assert(strstr(log, "probe: gpool "), "the probe did not run; log:\n%s", log);
    char cleanup[PATH_MAX + 16];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", work);
    cr_expect_eq(system(cleanup), 0);
}

/* What make install puts where, with a LIBDIR outside ${exec_prefix}/lib (a separate staging
 * tree). */
static void check_layout(const char *root)
{
    char tmpl[] = "/tmp/gpool-layout-XXXXXX";
    char *work = mkdtemp(tmpl);
    cr_assert_not_null(work);
    struct build_args q;
    get_build_args(&q, root);
    char cmd[40000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && unset MAKEFLAGS MFLAGS MAKELEVEL && make -s install -o lib "
             "-o %s/gpool-bench -o %s/libgpool_preload.so DESTDIR='%s' PREFIX=/opt/gp "
             "LIBDIR=/opt/gp/lib64 BUILD=%s CC=%s SAN=%s OPT=%s > '%s/log' 2>&1",
             root, q.build, q.build, work, q.build, q.cc, q.san, q.opt, work);
    cr_assert_eq(system(cmd), 0, "make install failed; see %s/log", work);

    char p[PATH_MAX + 128], want[64];
    snprintf(want, sizeof want, "libgpool.so.%d.%d.%d", GPOOL_VERSION_MAJOR, GPOOL_VERSION_MINOR,
             GPOOL_VERSION_PATCH);
    snprintf(p, sizeof p, "%s/opt/gp/lib64/%s", work, want);
    cr_expect(is_file(p), "%s missing", p);
    char soname[64];
    snprintf(soname, sizeof soname, "libgpool.so.%d", GPOOL_VERSION_MAJOR);
    snprintf(p, sizeof p, "%s/opt/gp/lib64/%s", work, soname);
    cr_expect(link_points_to(p, want), "%s is not a link to %s", p, want);
    snprintf(p, sizeof p, "%s/opt/gp/lib64/libgpool.so", work);
    cr_expect(link_points_to(p, soname), "%s is not a link to %s", p, soname);
    static const char *files[] = {
        "opt/gp/include/gpool.h",         "opt/gp/include/gpool_preload.h",
        "opt/gp/lib64/libgpool.a",        "opt/gp/lib64/pkgconfig/gpool.pc",
        "opt/gp/lib64/gpool/gpool-bench", "opt/gp/lib64/gpool/sim/libcuda.so.1"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", work, files[i]);
        cr_expect(is_file(p), "%s missing", p);
    }
    /* $BINDIR/gpool-bench: a relative link to the one beside what it runs */
    snprintf(p, sizeof p, "%s/opt/gp/bin/gpool-bench", work);
    cr_expect(link_points_to(p, "../lib64/gpool/gpool-bench"), "%s is not a link into lib64/gpool",
              p);
    cr_expect_eq(access(p, X_OK), 0, "gpool-bench is not executable");
    /* the programs gpool-bench runs: installed exactly when built */
    static const char *progs[] = {"dropin_client", "dropin_replay"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char built[PATH_MAX + 64];
        snprintf(built, sizeof built, "%s/bench/%s", getenv("GPOOL_TEST_BUILD"), progs[i]);
        snprintf(p, sizeof p, "%s/opt/gp/lib64/gpool/bench/%s", work, progs[i]);
        cr_expect_eq(is_file(p), is_file(built), "%s installed: %d, built: %d", progs[i],
                     is_file(p), is_file(built));
    }
    /* optional parts: installed exactly when they exist in the tree */
    char src[PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/include/gpool_torch.h", root);
    snprintf(p, sizeof p, "%s/opt/gp/include/gpool_torch.h", work);
    cr_expect_eq(is_file(p), is_file(src), "gpool_torch.h installed: %d, in the tree: %d",
                 is_file(p), is_file(src));
    snprintf(src, sizeof src, "%s/libgpool_preload.so", getenv("GPOOL_TEST_BUILD"));
    snprintf(p, sizeof p, "%s/opt/gp/lib64/libgpool_preload.so", work);
    cr_expect_eq(is_file(p), is_file(src), "libgpool_preload.so installed: %d, built: %d",
                 is_file(p), is_file(src));

    /* the .pc file names the prefix and a libdir outside ${exec_prefix}/lib */
    snprintf(p, sizeof p, "%s/opt/gp/lib64/pkgconfig/gpool.pc", work);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    char pc[4096];
    pc[fread(pc, 1, sizeof pc - 1, f)] = '\0';
    fclose(f);
    cr_expect(strstr(pc, "prefix=/opt/gp\n"), "gpool.pc:\n%s", pc);
    cr_expect(strstr(pc, "libdir=${exec_prefix}/lib64\n"), "gpool.pc:\n%s", pc);
    cr_expect(strstr(pc, "Libs: -L${libdir} -lgpool\n"), "gpool.pc:\n%s", pc);
    cr_expect(strstr(pc, "Libs.private:") && strstr(pc, "-ldl -lm -lpthread"), "gpool.pc:\n%s", pc);
    cr_expect(!strstr(pc, "jemalloc") && strstr(pc, "hwloc"), "gpool.pc:\n%s", pc);
    /* cuda.h's folder, for a program that makes its own streams (README's example) */
    const char *cuda = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    char cflags[PATH_MAX + 64];
    snprintf(cflags, sizeof cflags, "Cflags: -I${includedir} -I%s/include", cuda);
    cr_expect(strstr(pc, cflags), "gpool.pc lacks '%s':\n%s", cflags, pc);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    cr_expect_eq(system(cmd), 0);
}
