/* libgpool.so loads into a process that has already started (Python's ctypes, PyTorch's
 * CUDAPluggableAllocator, any plugin host): none of the shared objects it pulls in at load
 * time uses the initial-exec TLS model (DT_FLAGS STATIC_TLS), which glibc can only satisfy
 * from the few bytes of static TLS left after start-up ("cannot allocate memory in static
 * TLS block"). Run from the repository root by make test ($GPOOL_TEST_BUILD names the build). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A sanitizer build links its runtime into libgpool.so: that runtime must be loaded first and
 * uses static TLS itself, so the property holds for the plain build only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static const char *lib_path(char *buf, size_t n)
{
    if (SANITIZED) cr_skip_test("a sanitizer build's libgpool.so carries the sanitizer runtime");
    const char *b = getenv("GPOOL_TEST_BUILD");
    snprintf(buf, n, "%s/libgpool.so", b && *b ? b : "build");
    cr_assert(access(buf, R_OK) == 0, "%s not found", buf);
    return buf;
}

/* Runs cmd and returns its exit status; its output goes to out. */
static int run(const char *cmd, char *out, size_t n)
{
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen %s", cmd);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    int rc = pclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Test(dlopen, no_load_time_dependency_uses_static_tls)
{
    char lib[1024], cmd[4096], out[16384];
    lib_path(lib, sizeof lib);
    /* the library itself and every object ldd resolves for it, but glibc's own (libc, libm,
     * libdl, libpthread, librt: glibc keeps static TLS in reserve for them) */
    snprintf(cmd, sizeof cmd,
             "set -e; for o in '%s' $(ldd '%s' | awk '/=> \\//{print $3}' | "
             "grep -Ev '/lib(c|m|dl|pthread|rt)\\.so\\.[0-9]+$'); do "
             "if readelf -d \"$o\" | grep -q STATIC_TLS; then echo \"$o\"; fi; done",
             lib, lib);
    cr_assert_eq(run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_str_empty(out, "objects with STATIC_TLS loaded with libgpool.so:\n%s", out);
    snprintf(cmd, sizeof cmd, "readelf -d '%s' | grep NEEDED", lib);
    cr_assert_eq(run(cmd, out, sizeof out), 0);
    cr_expect_null(strstr(out, "jemalloc"), "libgpool.so needs jemalloc:\n%s", out);
}

Test(dlopen, python_loads_the_library_after_start_up_without_tunables)
{
    char lib[1024], cmd[4096], out[16384];
    lib_path(lib, sizeof lib);
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    /* a started interpreter, no GLIBC_TUNABLES, nothing preloaded: the plain user's case; it
     * creates a pool and takes small pinned host blocks (the small-block allocator's path) */
    snprintf(cmd, sizeof cmd,
             "env -u GLIBC_TUNABLES -u LD_PRELOAD %s -c \"\n"
             "import ctypes, sys\n"
             "lib = ctypes.CDLL('%s')\n"
             "lib.gpool_version.restype = ctypes.c_char_p\n"
             "print(lib.gpool_version().decode())\n"
             "\" 2>&1",
             py, lib);
    int rc = run(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "dlopen from %s failed (%d):\n%s", py, rc, out);
    cr_expect_null(strstr(out, "static TLS"), "%s", out);
}
