/*
 * device.c - choosing a backend from --device=auto|cpu|cuda[:N].
 *
 * auto: CUDA device 0 when one is usable, else the CPU, with one line on
 * stderr saying why (so a user never mistakes a CPU run for a GPU run).
 * cuda: the GPU or a clear TB_ERR_NO_DEVICE (bench/ exits 2).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"

int tb_device_parse(const char *spec, tb_device_kind *kind, int *ordinal)
{
    *ordinal = 0;
    if (!spec || strcmp(spec, "auto") == 0) {
        *kind = TB_DEVICE_AUTO;
        return TB_OK;
    }
    if (strcmp(spec, "cpu") == 0) {
        *kind = TB_DEVICE_CPU;
        return TB_OK;
    }
    if (strncmp(spec, "cuda", 4) == 0 && (spec[4] == 0 || spec[4] == ':')) {
        *kind = TB_DEVICE_CUDA;
        if (spec[4] == 0)
            return TB_OK;
        char *end = NULL;
        long v = strtol(spec + 5, &end, 10);
        if (end != spec + 5 && *end == 0 && v >= 0 && v < 1024) {
            *ordinal = (int)v;
            return TB_OK;
        }
    }
    return TB_FAIL(TB_ERR_INVALID,
                   "unknown device '%s': use --device=auto, cpu, cuda or cuda:N", spec);
}

int tb_backend_open(tb_device_kind kind, int ordinal, int threads, tb_backend **out)
{
    *out = NULL;
    if (kind == TB_DEVICE_CPU)
        return tb_backend_cpu_create(threads, out);
    const char *why = NULL;
    int count = tb_cuda_device_count(&why);
    if (kind == TB_DEVICE_CUDA) {
        if (count == 0)
            return TB_FAIL(TB_ERR_NO_DEVICE,
                           "--device=cuda:%d requested but no CUDA device is usable: %s%s",
                           ordinal, why ? why : "unknown reason",
                           why && strstr(why, "--device=cpu")
                               ? "" /* the reason says what to do already */
                               : "; use --device=cpu or --device=auto");
        TB_TRY(tb_backend_cuda_create(ordinal, out));
        return TB_OK;
    }
    if (count > 0) {
        int rc = tb_backend_cuda_create(0, out);
        if (rc == TB_OK)
            return TB_OK;
        fprintf(stderr, "tunebench: CUDA device 0 failed to open (%s); using the CPU backend\n",
                tb_error_message());
        tb_error_clear();
    } else {
        fprintf(stderr, "tunebench: no usable GPU (%s); using the CPU backend\n",
                why ? why : "unknown reason");
    }
    return tb_backend_cpu_create(threads, out);
}

void tb_backend_close(tb_backend *be)
{
    if (be)
        be->destroy(be);
}

/* Lower-case letters and digits, runs of anything else become one '-'. */
static void slugify(const char *in, char *out, size_t cap, size_t *len)
{
    int dash = 1;
    for (const char *p = in; *p && *len + 1 < cap; p++) {
        if (isalnum((unsigned char)*p)) {
            out[(*len)++] = (char)tolower((unsigned char)*p);
            dash = 0;
        } else if (!dash) {
            out[(*len)++] = '-';
            dash = 1;
        }
    }
    while (*len > 0 && out[*len - 1] == '-')
        (*len)--;
    out[*len] = 0;
}

void tb_device_slug(const tb_device_info *info, char *out, size_t cap)
{
    /* Drop vendor noise so "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
     * becomes "cpu-intel-xeon-platinum-8375c-cpu-2-90ghz". */
    char clean[160];
    size_t j = 0;
    for (const char *p = info->name; *p && j + 1 < sizeof clean; p++) {
        if (strncmp(p, "(R)", 3) == 0 || strncmp(p, "(TM)", 4) == 0) {
            p += p[1] == 'R' ? 2 : 3;
            continue;
        }
        clean[j++] = *p;
    }
    clean[j] = 0;
    size_t len = (size_t)snprintf(out, cap, "%s-", info->backend);
    if (len >= cap)
        return;
    slugify(clean, out, cap, &len);
}

void tb_device_describe(const tb_device_info *info, char *out, size_t cap)
{
    if (strcmp(info->backend, "cpu") == 0)
        snprintf(out, cap, "%s, %d thread%s", info->name, info->threads,
                 info->threads == 1 ? "" : "s");
    else
        snprintf(out, cap, "%s, %.1f GiB", info->name, info->total_mem / 1073741824.0);
}
