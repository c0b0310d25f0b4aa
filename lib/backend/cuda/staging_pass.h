/*
 * staging_pass.h - what both implementations of lib/backend/staging.h
 * share (staging.c, and staging_absent.c for a build without CUDA): the
 * argument rules of tb_staging_to_fixed and its pass-through path, where
 * the backend's memory is host memory and copies go through its copy_d2d.
 * Private to those two files.
 */
#ifndef TB_BACKEND_CUDA_STAGING_PASS_H
#define TB_BACKEND_CUDA_STAGING_PASS_H

#include <stddef.h>

#include "lib/backend/backend.h"
#include "lib/backend/staging.h"
#include "lib/core/status.h"

static inline int staging_fixed_args(const tb_staging *st, int nparts, void *dev[],
                                     void *const fixed[], const size_t bytes[])
{
    if (!st || !dev || !fixed || !bytes)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_to_fixed: NULL argument");
    if (nparts < 1 || nparts > TB_STAGING_MAX_PARTS)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_to_fixed: %d parts (1..%d)", nparts,
                       TB_STAGING_MAX_PARTS);
    return TB_OK;
}

/* tb_staging_to_fixed passing through: be's synchronous copy_d2d. */
static inline int staging_pass_to_fixed(tb_backend *be, int nparts, void *dev[],
                                        void *const fixed[], const size_t bytes[])
{
    for (int i = 0; i < nparts; i++) {
        if (!fixed[i] || fixed[i] == dev[i])
            continue;
        TB_TRY(be->copy_d2d(be, fixed[i], dev[i], bytes[i], NULL));
        dev[i] = fixed[i];
    }
    return TB_OK;
}

#endif
