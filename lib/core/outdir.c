/*
 * outdir.c - the results and plots folders; see outdir.h.
 *
 * Test: bazel test //lib/core:atomic_file_test (the output-folder part)
 */
#define _GNU_SOURCE
#include "lib/core/outdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int copy_path(char *out, size_t cap, const char *what, const char *a, const char *b)
{
    int n = b ? snprintf(out, cap, "%s/%s", a, b) : snprintf(out, cap, "%s", a);
    if (n < 0 || (size_t)n >= cap)
        return TB_FAIL(TB_ERR_INVALID, "%s too long: %s%s%s", what, a, b ? "/" : "", b ? b : "");
    return TB_OK;
}

int tb_outdir_root(const char *out_dir_flag, char *out, size_t cap)
{
    const char *flag = out_dir_flag && out_dir_flag[0] ? out_dir_flag : NULL;
    const char *workspace = getenv("BUILD_WORKSPACE_DIRECTORY");
    const char *working = getenv("BUILD_WORKING_DIRECTORY");
    char cwd[PATH_MAX];

    if (flag && flag[0] != '/' && working && working[0])
        return copy_path(out, cap, "--out-dir", working, flag);
    if (flag)
        return copy_path(out, cap, "--out-dir", flag, NULL);
    if (workspace && workspace[0])
        return copy_path(out, cap, "BUILD_WORKSPACE_DIRECTORY", workspace, NULL);
    if (!getcwd(cwd, sizeof cwd))
        return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__,
                                   "cannot find the current directory for results");
    return copy_path(out, cap, "current directory", cwd, NULL);
}

static int slug_ok(const char *slug)
{
    if (!slug[0] || slug[0] == '.')
        return 0;
    for (const char *p = slug; *p; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                 (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

int tb_outdir_init(tb_outdir *od, const char *out_dir_flag, const char *device_slug)
{
    char sub[PATH_MAX];
    if (!device_slug || !slug_ok(device_slug))
        return TB_FAIL(TB_ERR_INVALID, "bad device folder name '%s'",
                       device_slug ? device_slug : "(null)");
    TB_TRY(copy_path(od->slug, sizeof od->slug, "device name", device_slug, NULL));
    TB_TRY(tb_outdir_root(out_dir_flag, od->root, sizeof od->root));
    TB_TRY(copy_path(sub, sizeof sub, "results folder", "results", device_slug));
    TB_TRY(copy_path(od->results, sizeof od->results, "results folder", od->root, sub));
    TB_TRY(copy_path(sub, sizeof sub, "plots folder", "plots", device_slug));
    TB_TRY(copy_path(od->plots, sizeof od->plots, "plots folder", od->root, sub));
    return TB_OK;
}

int tb_outdir_create(const tb_outdir *od)
{
    TB_TRY(tb_mkdir_p(od->results));
    TB_TRY(tb_mkdir_p(od->plots));
    return TB_OK;
}

int tb_outdir_join(const char *dir, const char *file, char *out, size_t cap)
{
    return copy_path(out, cap, "path", dir, file);
}
