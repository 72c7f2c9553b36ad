/* util_preload.h — the interposer tests' helpers: run a program of tests/preload/ (built into
 * $GPOOL_TEST_BUILD/tests/preload by preload/preload.mk) with or without LD_PRELOAD, check its
 * exit code, read KEY=value fields from its output. Criterion assertions on failure. */
#ifndef GPOOL_UTIL_PRELOAD_H
#define GPOOL_UTIL_PRELOAD_H

enum { OUT_MAX = 1 << 16 };

struct run {
    int rc;
    char out[OUT_MAX]; /* stdout and stderr */
};

/* $GPOOL_TEST_BUILD (asserts it is set). */
const char *build_dir(void);
/* Run helper `prog` with argument `mode`; env is extra VAR=value words (GPOOL_CONF is unset
 * unless given); preload = 1 puts libgpool_preload.so in LD_PRELOAD. */
void run(struct run *r, const char *prog, const char *mode, int preload, const char *env);
/* run(), then check the helper's exit code (its output is the message when it differs). */
void run_expect(struct run *r, const char *prog, const char *mode, int preload, const char *env,
                int rc);
/* The number after "key=" at a word start in the output (asserts it is there). */
unsigned long field(const struct run *r, const char *key);
/* One mode of an adversarial program (tests/preload/adv_prog.c, adv2_prog.c) under the
 * drop-in, the simulator counting violations instead of aborting (GPOOL_SIM_STRICT=0): exit 0
 * and violations=0 expected. */
void adv_run(const char *prog, const char *mode, const char *env);
/* Every cudaFree mode of docs/dropin.md as GPOOL_CONF spells it ("" the default): the first
 * CUDAFREE_BASIC_MODES are the modes themselves, the rest small-batch variants. */
enum { CUDAFREE_BASIC_MODES = 6, CUDAFREE_MODES = 8 };
extern const char *const cudafree_modes[CUDAFREE_MODES];
/* adv_run in each of the basic cudaFree modes (env added to each). */
void adv_run_all_modes(const char *prog, const char *mode, const char *env);
/* How many times needle occurs in text. */
int count_lines_with(const char *text, const char *needle);

#endif
