/*
 * staging_absent.c - lib/backend/staging.h for a build without CUDA: every
 * backend's device memory is host memory, so put passes the host pointers
 * through. The CUDA build uses lib/backend/cuda/staging.c instead (which passes
 * through too for a backend that is not CUDA).
 */
#include <stdlib.h>

#include "lib/backend/cuda/staging_pass.h"
#include "lib/backend/staging.h"

struct tb_staging {
    tb_backend *be;
};

int tb_staging_create(tb_backend *be, const tb_staging_cfg *cfg, tb_staging **out)
{
    if (!be || !cfg || !out)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_create: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a staging");
    (*out)->be = be;
    return TB_OK;
}

int tb_staging_put(tb_staging *st, int nparts, const void *const host[], const size_t bytes[],
                   void *dev[])
{
    (void)st;
    (void)bytes;
    if (nparts < 1 || nparts > TB_STAGING_MAX_PARTS)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_put: %d parts (1..%d)", nparts,
                       TB_STAGING_MAX_PARTS);
    for (int i = 0; i < nparts; i++)
        dev[i] = (void *)host[i];
    return TB_OK;
}

int tb_staging_to_fixed(tb_staging *st, int nparts, void *dev[], void *const fixed[],
                        const size_t bytes[])
{
    TB_TRY(staging_fixed_args(st, nparts, dev, fixed, bytes));
    return staging_pass_to_fixed(st->be, nparts, dev, fixed, bytes);
}

int tb_staging_copies(const tb_staging *st)
{
    (void)st;
    return 0;
}

int tb_staging_destroy(tb_staging *st)
{
    free(st);
    return TB_OK;
}
