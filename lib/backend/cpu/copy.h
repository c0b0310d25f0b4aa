/*
 * copy.h - a parallel memcpy: the CPU backend's device-to-device copy,
 * and the bandwidth ceiling the element-wise kernels are measured against
 * (it splits work over OpenMP threads exactly like lib/backend/cpu/gelu.c).
 *
 * Effective bandwidth of a copy = 2 * bytes / time (read + write): the
 * figure bench:ceilings reports as the copy ceiling.
 */
#ifndef TB_COPY_CPU_H
#define TB_COPY_CPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copies bytes from src to dst with threads OpenMP threads (0 = all cores),
 * one contiguous chunk each. REQUIRES: the ranges do not overlap.
 * Returns TB_ERR_INVALID for NULL pointers (with bytes > 0) or threads < 0. */
int tb_cpu_copy(void *dst, const void *src, size_t bytes, int threads);

#ifdef __cplusplus
}
#endif
#endif
