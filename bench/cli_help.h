/* cli_help.h — gpool-bench's per-command help and the checks it makes before a run. */
#ifndef GPOOL_BENCH_CLI_HELP_H
#define GPOOL_BENCH_CLI_HELP_H

#include <stddef.h>
#include <stdio.h>

/* Print the help of one command (its options, what the strategies are) to f. Returns 0, or -1
 * when cmd is not a command this file knows (the caller prints the general usage). */
int bench_cli_help(FILE *f, const char *cmd);

/* 1 when command cmd takes option --opt (opt without its dashes): its help names it. An
 * option the command does not use is refused, not ignored. */
int bench_cli_takes(const char *cmd, const char *opt);

/* How many arguments besides options cmd takes: 0 (hotpath, scale, info), 1 (replay, fit:
 * a trace; view: a snapshot), or many (compare: traces). */
int bench_cli_max_args(const char *cmd);

/* The strategies, one line each, with what they model and what they need. */
void bench_cli_strategies(FILE *f);

/* Check, before anything runs, that an output file named by option opt can be written: its
 * folder exists and is writable, and it is not a folder itself or a read-only file. Nothing is
 * created. Returns 0, or -1 with a one-line reason in err. */
int bench_check_output(const char *opt, const char *path, char *err, size_t errlen);

#endif
