/*
 * trace_nvtx.c - NVTX ranges for the step timeline (lib/train/trace.h) on CUDA
 * builds: Nsight Systems shows each phase as a range. nvtx3 is header-only
 * (/usr/local/cuda/include/nvtx3): it loads an injection library at run
 * time only when a tool asks for one (NVTX_INJECTION64_PATH), so nothing
 * extra is linked but libdl.
 */
#include <nvtx3/nvToolsExt.h>

#include "lib/train/trace.h"

void tb_nvtx_push(const char *name) { nvtxRangePushA(name); }

void tb_nvtx_pop(void) { nvtxRangePop(); }
