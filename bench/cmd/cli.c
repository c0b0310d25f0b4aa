/* cli.c - see cli.h. */
#include "bench/cmd/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/core/status.h"

int tb_cli_parse(const char *prog, const char *usage, const char *summary, tb_flag *flags,
                 size_t nflags, int positional, int *argc, char **argv)
{
    int help = 0;
    if (tb_flags_parse(flags, nflags, argc, argv, NULL, &help) != TB_OK) {
        tb_error_print(stderr);
        return 2;
    }
    if (help) {
        char line[256];
        snprintf(line, sizeof line, "%s%s%s", prog, *usage ? " " : "", usage);
        tb_flags_usage(stdout, line, summary, flags, nflags);
        return 0;
    }
    if (!positional && *argc > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", prog, argv[1]);
        return 2;
    }
    return -1;
}

void tb_cli_path(const char *arg, char *out, size_t cap)
{
    const char *wd = getenv("BUILD_WORKING_DIRECTORY");
    if (arg[0] != '/' && wd)
        snprintf(out, cap, "%s/%s", wd, arg);
    else
        snprintf(out, cap, "%s", arg);
}
