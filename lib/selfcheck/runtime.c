/*
 * runtime.c - selfcheck's checks of a backend's runtime slots
 * (memory round trips and accounting, streams and events, device info) and
 * of the slots that move or make device data without a float reference:
 * graph capture and replay, augment_u8, labels_u8_to_i32.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "kernels/augment_math.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

/* ------------------------------------------------------------ runtime slots */

static size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

int check_mem_roundtrip(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 1000003; /* odd: no copy path sees whole vectors only */
    unsigned char *pageable = NULL, *pinned = NULL;
    void *d1 = NULL, *d2 = NULL;
    sc_case c;
    sc_case_start(&c, "round trip %zu bytes: dev_alloc, copy_h2d, copy_d2d, copy_peer, copy_d2h, "
                      "memset, pageable and pinned host", bytes);
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&pageable, bytes, 0));
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&pinned, bytes, 1));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d1, bytes));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d2, bytes));
    for (size_t i = 0; i < bytes; i++)
        pageable[i] = (unsigned char)(tb_rng_next_u64(&sc->rng) >> 56);
    memset(pinned, 0, bytes);
    SC_CALL(&c, out_free, be->copy_h2d(be, d1, pageable, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_d2d(be, d2, d1, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d2, bytes, NULL));
    if (memcmp(pinned, pageable, bytes) != 0)
        sc_case_fail(&c, "h2d, d2d, d2h changed byte %zu", first_diff(pinned, pageable, bytes));
    /* copy_peer within one device here; across GPUs in the DataParallel step check */
    SC_CALL(&c, out_free, be->memset(be, d1, 0, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_peer(be, d1, be, d2, bytes));
    SC_CALL(&c, out_free, be->sync(be));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d1, bytes, NULL));
    if (memcmp(pinned, pageable, bytes) != 0)
        sc_case_fail(&c, "copy_peer changed byte %zu", first_diff(pinned, pageable, bytes));
    /* all but the last 7 bytes: memset must stop where it is told */
    SC_CALL(&c, out_free, be->memset(be, d2, 0x5a, bytes - 7, NULL));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d2, bytes, NULL));
    for (size_t i = 0; i < bytes && !c.failed; i++) {
        unsigned char want = i < bytes - 7 ? 0x5a : pageable[i];
        if (pinned[i] != want)
            sc_case_fail(&c, "after memset of %zu bytes, byte %zu is 0x%02x, want 0x%02x",
                         bytes - 7, i, pinned[i], want);
    }
out_free:
    if (d2)
        SC_CALL(&c, out_free_d1, be->dev_free(be, d2));
out_free_d1:
    if (d1)
        SC_CALL(&c, out_free_host, be->dev_free(be, d1));
out_free_host:
    if (pinned)
        SC_CALL(&c, out_free_pageable, be->host_free(be, pinned, 1));
out_free_pageable:
    if (pageable)
        SC_CALL(&c, out_end, be->host_free(be, pageable, 0));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* mem_stats, mem_reset_peak, mem_set_limit, and the slots that may be NULL. */
int check_mem_accounting(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 1 << 20;
    size_t in0, peak0, in1, peak1, in2, peak2, in3;
    void *d = NULL, *extra = NULL;
    sc_case c;
    sc_case_start(&c, "accounting: mem_stats, mem_reset_peak, mem_set_limit%s%s",
                  be->mem_empty_cache ? ", mem_empty_cache" : "",
                  be->mem_set_mode ? ", mem_set_mode" : "");
    SC_CALL(&c, out_end, be->mem_stats(be, &in0, &peak0));
    SC_CALL(&c, out_end, be->dev_alloc(be, &d, bytes));
    SC_CALL(&c, out_free, be->mem_stats(be, &in1, &peak1));
    if (in1 < in0 + bytes)
        sc_case_fail(&c, "in_use grew by %zd bytes after a %zu-byte dev_alloc",
                     (ssize_t)(in1 - in0), bytes);
    if (peak1 < in1)
        sc_case_fail(&c, "peak %zu below in_use %zu", peak1, in1);
    SC_CALL(&c, out_free, be->mem_reset_peak(be));
    SC_CALL(&c, out_free, be->mem_stats(be, &in2, &peak2));
    if (peak2 < in2 || peak2 > peak1)
        sc_case_fail(&c, "after mem_reset_peak: peak %zu, in_use %zu (peak before %zu)", peak2,
                     in2, peak1);
    SC_CALL(&c, out_free, be->mem_set_limit(be, in2 + 4096));
    int rc = be->dev_alloc(be, &extra, bytes);
    if (rc != TB_ERR_DEVICE_OOM)
        sc_case_fail(&c, "dev_alloc past mem_set_limit returned %s, want TB_ERR_DEVICE_OOM",
                     tb_err_name(rc));
    tb_error_clear();
    if (rc == TB_OK)
        SC_CALL(&c, out_free, be->dev_free(be, extra));
    SC_CALL(&c, out_free, be->mem_set_limit(be, 0));
    SC_CALL(&c, out_end, be->dev_free(be, d));
    d = NULL;
    SC_CALL(&c, out_end, be->mem_stats(be, &in3, &peak2));
    if (in3 + bytes > in2)
        sc_case_fail(&c, "in_use fell from %zu to %zu after freeing %zu bytes", in2, in3, bytes);
    if (be->mem_empty_cache)
        SC_CALL(&c, out_end, be->mem_empty_cache(be));
    if (be->mem_set_mode) {
        SC_CALL(&c, out_end, be->mem_set_mode(be, TB_MEM_PLAIN, 0));
        SC_CALL(&c, out_end, be->dev_alloc(be, &d, 4096));
        SC_CALL(&c, out_free, be->dev_free(be, d));
        d = NULL;
        SC_CALL(&c, out_end, be->mem_set_mode(be, TB_MEM_CACHING, 0)); /* the default */
    }
out_free:
    if (d)
        SC_CALL(&c, out_end, be->dev_free(be, d));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* Async copies and memset on a created stream, ordered by events. */
int check_streams(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 262147;
    unsigned char *src = NULL, *dst = NULL;
    void *d1 = NULL, *d2 = NULL;
    tb_stream *s = NULL;
    tb_event *e0 = NULL, *e1 = NULL;
    float ms = -1.0f;
    sc_case c;
    sc_case_start(&c, "streams and events: async h2d, d2d, memset, d2h on a created stream; "
                      "record, wait, sync, elapsed");
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&src, bytes, 1));
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&dst, bytes, 1));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d1, bytes));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d2, bytes));
    SC_CALL(&c, out_free, be->stream_create(be, &s));
    SC_CALL(&c, out_free, be->event_create(be, &e0));
    SC_CALL(&c, out_free, be->event_create(be, &e1));
    for (size_t i = 0; i < bytes; i++)
        src[i] = (unsigned char)(tb_rng_next_u64(&sc->rng) >> 56) | 1; /* never 0: the memset below writes 0 */
    memset(dst, 0x77, bytes);
    SC_CALL(&c, out_free, be->event_record(be, e0, s));
    SC_CALL(&c, out_free, be->copy_h2d(be, d1, src, bytes, s));
    SC_CALL(&c, out_free, be->copy_d2d(be, d2, d1, bytes, s));
    SC_CALL(&c, out_free, be->memset(be, d1, 0, bytes, s));
    SC_CALL(&c, out_free, be->copy_d2h(be, dst, d2, bytes, s));
    SC_CALL(&c, out_free, be->event_record(be, e1, s));
    SC_CALL(&c, out_free, be->stream_wait_event(be, NULL, e1));
    SC_CALL(&c, out_free, be->event_sync(be, e1));
    SC_CALL(&c, out_free, be->stream_sync(be, s));
    SC_CALL(&c, out_free, be->sync(be));
    SC_CALL(&c, out_free, be->event_elapsed_ms(be, e0, e1, &ms));
    if (!(ms >= 0.0f) || !isfinite(ms))
        sc_case_fail(&c, "event_elapsed_ms gave %g ms, want a finite value >= 0", ms);
    if (memcmp(dst, src, bytes) != 0)
        sc_case_fail(&c, "async h2d, d2d, d2h changed byte %zu", first_diff(dst, src, bytes));
    SC_CALL(&c, out_free, be->copy_d2h(be, dst, d1, bytes, NULL));
    for (size_t i = 0; i < bytes && !c.failed; i++)
        if (dst[i] != 0)
            sc_case_fail(&c, "async memset left byte %zu as 0x%02x", i, dst[i]);
    snprintf(c.note, sizeof c.note, "elapsed=%.3g ms", ms);
out_free:
    if (e1)
        SC_CALL(&c, out_free_e0, be->event_destroy(be, e1));
out_free_e0:
    if (e0)
        SC_CALL(&c, out_free_stream, be->event_destroy(be, e0));
out_free_stream:
    if (s)
        SC_CALL(&c, out_free_d2, be->stream_destroy(be, s));
out_free_d2:
    if (d2)
        SC_CALL(&c, out_free_d1, be->dev_free(be, d2));
out_free_d1:
    if (d1)
        SC_CALL(&c, out_free_dst, be->dev_free(be, d1));
out_free_dst:
    if (dst)
        SC_CALL(&c, out_free_src, be->host_free(be, dst, 1));
out_free_src:
    if (src)
        SC_CALL(&c, out_end, be->host_free(be, src, 1));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

int check_device_info(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    tb_device_info info;
    sc_case c;
    sc_case_start(&c, "fingerprint fields");
    SC_CALL(&c, out_end, be->device_info(be, &info));
    if (strcmp(info.backend, be->name) != 0)
        sc_case_fail(&c, "backend \"%s\", want \"%s\"", info.backend, be->name);
    if (!info.name[0])
        sc_case_fail(&c, "no device name");
    if (info.index != be->device)
        sc_case_fail(&c, "index %d, want %d", info.index, be->device);
    snprintf(c.note, sizeof c.note, "%s %d: %s", info.backend, info.index, info.name);
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* ------------------------------------------------------------ capture and device data */

/* graph_begin .. graph_destroy, one case for the four slots: add then axpby
 * captured, replayed twice with new inputs copied into the same buffers
 * between replays, against the same ops run directly (bitwise: the same
 * kernels on the same data). */
int check_graph_capture(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t n = 4097;
    float *a, *da, *b, *db, *want, *dwant, *out, *dout;
    tb_graph *g = NULL;
    sc_case c;
    TB_TRY(sc_randf(sc, &a, &da, n, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &b, &db, n, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &dwant, n));
    TB_TRY(sc_outf(sc, &out, &dout, n));
    sc_case_start(&c, "add + axpby captured, replayed twice, n=%zu", n);
    SC_CALL(&c, out_end, be->graph_begin(be));
    int rc = be->add(be, da, db, dout, n);
    if (rc == TB_OK)
        rc = be->axpby(be, 2.0f, da, 0.5f, dout, n);
    tb_graph *tmp = NULL;
    int end_rc = be->graph_end(be, &tmp); /* always ends the capture */
    g = tmp;
    SC_CALL(&c, out_end, rc);
    SC_CALL(&c, out_end, end_rc);
    for (int rep = 0; rep < 2 && !c.failed; rep++) {
        if (rep == 1) { /* new inputs in the captured buffers */
            sc_fill(sc, a, n, -2.0f, 2.0f);
            SC_CALL(&c, out_end, be->copy_h2d(be, da, a, n * sizeof *a, NULL));
        }
        SC_CALL(&c, out_end, be->memset(be, dout, 0xff, n * sizeof(float), NULL));
        SC_CALL(&c, out_end, be->graph_launch(be, g));
        SC_CALL(&c, out_end, be->add(be, da, db, dwant, n));
        SC_CALL(&c, out_end, be->axpby(be, 2.0f, da, 0.5f, dwant, n));
        if (!sc_ran(sc, &c, TB_OK, 0))
            goto out_end;
        SC_CALL(&c, out_end, be->copy_d2h(be, want, dwant, n * sizeof *want, NULL));
        TB_TRY(sc_cmp_exact(sc, &c, rep ? "replay 2" : "replay 1", want, dout, n, sizeof(float)));
    }
out_end:
    if (g) {
        int drc = be->graph_destroy(be, g);
        if (drc != TB_OK)
            sc_case_fail_rc(&c, "graph_destroy", drc);
    }
    sc_case_end(sc, &c);
    return TB_OK;
}

/* augment_u8 against kernels/augment_math.h on the host (the function
 * datasets/augment.c runs; //datasets:augment_test ties the two), NCHW and
 * NHWC, 1 and 3 channels, with crops off the edge and flips. */
#define AUG_N 5 /* images per case */

int tb_selfcheck_host_augment_u8(tb_backend *be, const tb_augment_desc *d, const uint8_t *src,
                                 const int32_t *params, float *dst, int n)
{
    (void)be;
    size_t plane = (size_t)d->h * d->w, per = plane * d->c;
    int nhwc = d->layout == TB_NHWC;
    for (int s = 0; s < n; s++)
        for (int ch = 0; ch < d->c; ch++)
            for (int y = 0; y < d->h; y++)
                for (int x = 0; x < d->w; x++) {
                    size_t o = nhwc ? s * per + ((size_t)y * d->w + x) * d->c + ch
                                    : s * per + ch * plane + (size_t)y * d->w + x;
                    dst[o] = tb_augment_pixel(src + s * per + ch * plane, d->h, d->w, d->pad,
                                              params[3 * s], params[3 * s + 1],
                                              params[3 * s + 2], d->scale[ch], d->bias[ch], y, x);
                }
    return TB_OK;
}

int tb_selfcheck_host_labels_u8_to_i32(tb_backend *be, const uint8_t *src, int32_t *dst, int n)
{
    (void)be;
    for (int i = 0; i < n; i++)
        dst[i] = src[i];
    return TB_OK;
}

static int augment_one(sc_ctx *sc, const int shape[4], tb_layout layout)
{
    tb_backend *be = sc->be;
    const int n = AUG_N;
    tb_augment_desc d = {.c = shape[0], .h = shape[1], .w = shape[2], .pad = shape[3],
                         .layout = layout};
    size_t total = (size_t)d.h * d.w * d.c * n;
    uint8_t *src, *dsrc;
    int32_t params[3 * AUG_N], *dparams;
    float *want, *dout;
    for (int ch = 0; ch < d.c; ch++)
        tb_augment_norm(1, 0.3f + 0.1f * ch, 0.35f - 0.05f * ch, &d.scale[ch], &d.bias[ch]);
    TB_TRY(sc_host(sc, (void **)&src, total));
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(tb_rng_next_u64(&sc->rng) >> 56);
    for (int s = 0; s < n; s++) {
        params[3 * s] = (int32_t)(tb_rng_next_u64(&sc->rng) % (uint64_t)(2 * d.pad + 1));
        params[3 * s + 1] = s == 0 ? 0 : (int32_t)(tb_rng_next_u64(&sc->rng) % (uint64_t)(2 * d.pad + 1));
        params[3 * s + 2] = s % 2;
    }
    TB_TRY(sc_upload(sc, (void **)&dsrc, src, total));
    TB_TRY(sc_upload(sc, (void **)&dparams, params, sizeof params));
    TB_TRY(sc_outf(sc, &want, &dout, total));
    TB_TRY(tb_selfcheck_host_augment_u8(NULL, &d, src, params, want, n));
    sc_case c;
    sc_case_start(&c, "%dx%dx%d pad %d %s n=%d", d.c, d.h, d.w, d.pad,
                  layout == TB_NHWC ? "NHWC" : "NCHW", n);
    TB_TRY(SC_FINISH(sc, &c, be->augment_u8(be, &d, dsrc, dparams, dout, n), 0,
                     {.what = "images", .want = want, .got = dout, .n = total,
                      .elem = sizeof(float)}));
    return sc_release(sc);
}

int check_augment_u8(sc_ctx *sc)
{
    static const int shapes[2][4] = {{1, 28, 28, 2}, {3, 32, 30, 4}};
    for (int si = 0; si < 2; si++)
        for (int lay = 0; lay < 2; lay++)
            TB_TRY(augment_one(sc, shapes[si], lay ? TB_NHWC : TB_NCHW));
    return TB_OK;
}

int check_labels_u8_to_i32(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    static const int sizes[] = {1, 255, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        uint8_t *src, *dsrc;
        int32_t *want, *dout;
        TB_TRY(sc_host(sc, (void **)&src, (size_t)n));
        TB_TRY(sc_host(sc, (void **)&want, (size_t)n * sizeof *want));
        for (int i = 0; i < n; i++) {
            src[i] = (uint8_t)(tb_rng_next_u64(&sc->rng) >> 56);
        }
        TB_TRY(tb_selfcheck_host_labels_u8_to_i32(NULL, src, want, n));
        TB_TRY(sc_upload(sc, (void **)&dsrc, src, (size_t)n));
        TB_TRY(sc_dev(sc, (void **)&dout, (size_t)n * sizeof *dout));
        sc_case c;
        sc_case_start(&c, "n=%d", n);
        TB_TRY(SC_FINISH(sc, &c, be->labels_u8_to_i32(be, dsrc, dout, n), 0,
                         {.what = "labels", .want = want, .got = dout, .n = (size_t)n,
                          .elem = sizeof *want}));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

