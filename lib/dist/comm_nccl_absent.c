/*
 * comm_nccl_absent.c - tb_comm_nccl_create in a build without the CUDA
 * toolkit (lib/dist/BUILD compiles this file instead of comm_nccl.c), so callers
 * need no #ifdef: asking for NCCL fails with a status saying why.
 *
 * Test: bazel test //lib/dist:comm_test (checks this path in CPU-only builds)
 */
#include "lib/dist/comm.h"

int tb_comm_nccl_create(tb_comm *mpi, tb_backend *be, tb_comm **out)
{
    (void)mpi;
    (void)be;
    if (out)
        *out = NULL;
    return TB_FAIL(TB_ERR_UNSUPPORTED, "NCCL communicator requested, but this build has no "
                   "CUDA toolkit (it was not found at build time; set CUDA_PATH, see README)");
}
