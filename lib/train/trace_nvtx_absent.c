/* trace_nvtx_absent.c - NVTX ranges without the CUDA toolkit: nothing to
 * tell (lib/train/trace.h). */
#include "lib/train/trace.h"

void tb_nvtx_push(const char *name) { (void)name; }

void tb_nvtx_pop(void) {}
