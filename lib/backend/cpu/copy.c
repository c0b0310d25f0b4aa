/*
 * copy.c - parallel memcpy; see copy.h.
 *
 * Each thread memcpy's one contiguous, cache-line-aligned chunk. glibc's
 * memcpy already switches to non-temporal stores for large copies (above
 * its non_temporal_threshold, a fraction of the last-level cache), which
 * avoids reading the destination before writing it, so own streaming
 * stores would add nothing here.
 */
#include "lib/backend/cpu/copy.h"

#include <omp.h>
#include <string.h>

#include "lib/core/status.h"

/* Below this a second thread costs more to wake than it saves. */
#define TB_COPY_PAR_MIN ((size_t)256 * 1024)
#define TB_COPY_ALIGN ((size_t)64)

int tb_cpu_copy(void *dst, const void *src, size_t bytes, int threads)
{
    if (threads < 0)
        return TB_FAIL(TB_ERR_INVALID, "tb_cpu_copy: threads = %d", threads);
    if (bytes == 0)
        return TB_OK;
    if (!dst || !src)
        return TB_FAIL(TB_ERR_INVALID, "tb_cpu_copy: NULL pointer for %zu bytes", bytes);
    if (threads == 0)
        threads = omp_get_num_procs();
    if (bytes < TB_COPY_PAR_MIN)
        threads = 1;

    size_t chunk = (bytes + (size_t)threads - 1) / (size_t)threads;
    chunk = (chunk + TB_COPY_ALIGN - 1) / TB_COPY_ALIGN * TB_COPY_ALIGN;
    char *d = dst;
    const char *s = src;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < threads; i++) {
        size_t begin = (size_t)i * chunk;
        if (begin < bytes) {
            size_t len = bytes - begin < chunk ? bytes - begin : chunk;
            memcpy(d + begin, s + begin, len);
        }
    }
    return TB_OK;
}
