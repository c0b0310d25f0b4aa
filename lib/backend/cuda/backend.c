/*
 * backend.c - the CUDA backend: the tb_backend table (lib/backend/backend.h)
 * on cudart, cuBLAS, cuDNN and the own kernels in kernels/.
 *
 * Compiled only where the toolkit was found (tools/local_config.bzl); the
 * build without it gets lib/backend/cuda/absent.c instead. This file links
 * cudart, cuBLAS, cuDNN and NCCL but never libcuda or NVML, so a binary
 * built with it starts on a machine without a GPU driver: there
 * tb_cuda_device_count() says why no device is usable and --device=auto
 * falls back to the CPU (lib/backend/device.c).
 *
 * What lives here: creation and destruction, the table (filled by
 * tb_backend_cuda_fill_table, which touches no device), copies, memset,
 * streams, events and device info. The op families live in a file each
 * (listed in lib/backend/cuda/cuda.h), memory in lib/backend/cuda/alloc.c.
 *
 * Ordering: every op runs on the backend's own compute stream, created
 * non-blocking so that it never serializes with the legacy default stream.
 * Because of that, a "synchronous" copy or memset (stream NULL) is issued
 * on the compute stream and waited for, as PyTorch does for
 * non_blocking=False; a plain cudaMemcpy would go to the legacy stream and
 * could overtake kernels still queued on the compute stream.
 *
 * Threads: one thread at a time drives a backend (its allocation table is
 * not locked); host_alloc/host_free touch no backend state and may be
 * called from loader workers.
 *
 * Tests: bazel test //lib/backend/cuda:cuda_probe_test (here, with no driver, it checks
 * the no-device path; on a GPU machine it also exercises the table) and
 * //lib/backend/cuda:cuda_table_test (every slot filled by its own function).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "lib/backend/backend.h"
#include "lib/backend/cuda_verdict.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/backend/nvml_dl.h"
#include "lib/core/status.h"

static cuda_ctx *ctx_of(tb_backend *be) { return (cuda_ctx *)be->ctx; }

/* Kernels and cudaMalloc act on the calling thread's current device; one
 * thread may drive several backends (data parallel), so entry points that
 * allocate or launch make this backend's device current first. */
int tb_cuda_bind(tb_backend *be)
{
    TB_CHECK_CUDA(cudaSetDevice(be->device));
    return TB_OK;
}

static cudaStream_t stream_of(tb_backend *be, tb_stream *s)
{
    return s && s != TB_ON_COMPUTE ? (cudaStream_t)s : ctx_of(be)->compute;
}

/* ---------------------------------------------------------------------
 * Device count and why there is none
 * ------------------------------------------------------------------- */

/* Reads what tb_cuda_verdict_machine (lib/backend/cuda_verdict.h) needs;
 * its decision tells error 35's two causes apart: no driver at all, or one
 * older than the runtime this build links. */
static void describe_no_device(cudaError_t e, int n, char *why, size_t cap)
{
    tb_cuda_probe in = {(int)e, n, 0, 0, getenv("CUDA_VISIBLE_DEVICES")};

    /* Both calls work without a driver; failures leave 0 = unknown. */
    if (cudaDriverGetVersion(&in.driver_version) != cudaSuccess)
        in.driver_version = 0;
    if (cudaRuntimeGetVersion(&in.runtime_version) != cudaSuccess)
        in.runtime_version = 0;
    cudaGetLastError(); /* none of these may be blamed on a later call */
    tb_cuda_verdict_machine(&in, why, cap);
}

/* *why points to a per-thread buffer valid until the next call on the
 * same thread; "" when devices were found. */
int tb_cuda_device_count(const char **why)
{
    static _Thread_local char reason[512];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    reason[0] = '\0';
    if (e != cudaSuccess) {
        cudaGetLastError();
        n = 0;
    }
    if (n <= 0) {
        n = 0;
        describe_no_device(e, n, reason, sizeof reason);
    }
    if (why)
        *why = reason;
    return n;
}

int tb_cuda_built(void) { return 1; }

/* ---------------------------------------------------------------------
 * Host memory (device memory: lib/backend/cuda/alloc.c)
 * ------------------------------------------------------------------- */

/* pinned: page-locked (cudaHostAlloc), so async copies really overlap;
 * pageable: plain malloc, what a program gets by default. */
static int cuda_host_alloc(tb_backend *be, void **p, size_t bytes, int pinned)
{
    *p = NULL;
    if (bytes == 0)
        return TB_OK;
    if (pinned) {
        TB_TRY(tb_cuda_bind(be));
        TB_CHECK_CUDA(cudaHostAlloc(p, bytes, cudaHostAllocDefault));
        return TB_OK;
    }
    *p = malloc(bytes);
    if (!*p)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate %zu bytes of host memory", bytes);
    return TB_OK;
}

static int cuda_host_free(tb_backend *be, void *p, int pinned)
{
    (void)be;
    if (!p)
        return TB_OK;
    if (pinned) {
        TB_CHECK_CUDA(cudaFreeHost(p));
        return TB_OK;
    }
    free(p);
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * Copies and memset. s == NULL: on the compute stream, waited for.
 * ------------------------------------------------------------------- */

static int cuda_copy(tb_backend *be, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, tb_stream *s)
{
    cudaStream_t st = stream_of(be, s);

    if (bytes == 0)
        return TB_OK;
    TB_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, st));
    if (!s)
        TB_CHECK_CUDA(cudaStreamSynchronize(st));
    return TB_OK;
}

static int cuda_copy_h2d(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s)
{
    return cuda_copy(be, dst, src, bytes, cudaMemcpyHostToDevice, s);
}

static int cuda_copy_d2h(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s)
{
    return cuda_copy(be, dst, src, bytes, cudaMemcpyDeviceToHost, s);
}

static int cuda_copy_d2d(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s)
{
    return cuda_copy(be, dst, src, bytes, cudaMemcpyDeviceToDevice, s);
}

/* Lets be's device reach src's memory directly (NVLink or PCIe P2P) the
 * first time the pair copies; where the GPUs cannot, cudaMemcpyPeerAsync
 * stages through host memory by itself. Ordinals past 63 are not tracked
 * and go without. */
static int cuda_enable_peer(tb_backend *be, int src_device)
{
    cuda_ctx *c = ctx_of(be);
    int can = 0;

    if (src_device == be->device || src_device < 0 || src_device > 63 ||
        (c->peer_tried & (1ull << src_device)))
        return TB_OK;
    c->peer_tried |= 1ull << src_device;
    TB_CHECK_CUDA(cudaDeviceCanAccessPeer(&can, be->device, src_device));
    if (!can)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    cudaError_t e = cudaDeviceEnablePeerAccess(src_device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError(); /* enabled by someone else in this process: fine */
        return TB_OK;
    }
    TB_CHECK_CUDA(e);
    return TB_OK;
}

/* On be's compute stream, between two cross-device waits: the copy waits
 * for src's work so far, and src's later work waits for the copy (it may
 * overwrite what is being read). Events are reused: a wait takes the
 * record made before it. */
static int cuda_copy_peer(tb_backend *be, void *dst, tb_backend *src_be, const void *src,
                          size_t bytes)
{
    cuda_ctx *c = ctx_of(be), *sc;

    if (!tb_cuda_owns(src_be))
        return TB_FAIL(TB_ERR_INVALID, "copy_peer to cuda:%d from a %s backend: only between "
                       "CUDA backends; copy through host memory (copy_d2h, copy_h2d) instead",
                       be->device, src_be ? src_be->name : "NULL");
    if (bytes == 0)
        return TB_OK;
    sc = ctx_of(src_be);
    TB_TRY(cuda_enable_peer(be, src_be->device));
    TB_TRY(tb_cuda_bind(src_be));
    TB_CHECK_CUDA(cudaEventRecord(sc->peer_event, sc->compute));
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaStreamWaitEvent(c->compute, sc->peer_event, 0));
    TB_CHECK_CUDA(cudaMemcpyPeerAsync(dst, be->device, src, src_be->device, bytes, c->compute));
    TB_CHECK_CUDA(cudaEventRecord(c->peer_event, c->compute));
    TB_TRY(tb_cuda_bind(src_be));
    TB_CHECK_CUDA(cudaStreamWaitEvent(sc->compute, c->peer_event, 0));
    return TB_OK;
}

static int cuda_memset(tb_backend *be, void *p, int value, size_t bytes, tb_stream *s)
{
    cudaStream_t st = stream_of(be, s);

    if (bytes == 0)
        return TB_OK;
    /* cudaMemsetAsync acts on the current device's context, which another
     * backend driven by this thread may have changed. */
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaMemsetAsync(p, value, bytes, st));
    if (!s)
        TB_CHECK_CUDA(cudaStreamSynchronize(st));
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * Streams and events. A tb_stream * is the cudaStream_t itself and a
 * tb_event * the cudaEvent_t: both are pointers, nothing to allocate.
 * ------------------------------------------------------------------- */

static int cuda_stream_create(tb_backend *be, tb_stream **s)
{
    cudaStream_t st;

    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    *s = (tb_stream *)st;
    return TB_OK;
}

static int cuda_stream_destroy(tb_backend *be, tb_stream *s)
{
    (void)be;
    if (!s)
        return TB_FAIL(TB_ERR_INVALID, "stream_destroy: NULL is the compute stream, owned by the backend");
    TB_CHECK_CUDA(cudaStreamDestroy((cudaStream_t)s));
    return TB_OK;
}

static int cuda_stream_sync(tb_backend *be, tb_stream *s)
{
    TB_CHECK_CUDA(cudaStreamSynchronize(stream_of(be, s)));
    return TB_OK;
}

static int cuda_event_create(tb_backend *be, tb_event **e)
{
    cudaEvent_t ev;

    TB_TRY(tb_cuda_bind(be));
    /* Default flags: timing enabled, since events time device work. */
    TB_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDefault));
    *e = (tb_event *)ev;
    return TB_OK;
}

static int cuda_event_destroy(tb_backend *be, tb_event *e)
{
    (void)be;
    if (!e)
        return TB_OK;
    TB_CHECK_CUDA(cudaEventDestroy((cudaEvent_t)e));
    return TB_OK;
}

static int cuda_event_record(tb_backend *be, tb_event *e, tb_stream *s)
{
    TB_CHECK_CUDA(cudaEventRecord((cudaEvent_t)e, stream_of(be, s)));
    return TB_OK;
}

static int cuda_stream_wait_event(tb_backend *be, tb_stream *s, tb_event *e)
{
    TB_CHECK_CUDA(cudaStreamWaitEvent(stream_of(be, s), (cudaEvent_t)e, 0));
    return TB_OK;
}

static int cuda_event_sync(tb_backend *be, tb_event *e)
{
    (void)be;
    TB_CHECK_CUDA(cudaEventSynchronize((cudaEvent_t)e));
    return TB_OK;
}

static int cuda_event_elapsed_ms(tb_backend *be, tb_event *start, tb_event *end, float *ms)
{
    (void)be;
    TB_CHECK_CUDA(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return TB_OK;
}

static int cuda_sync(tb_backend *be)
{
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaStreamSynchronize(ctx_of(be)->compute));
    /* Side streams too: "all work on the device". */
    TB_CHECK_CUDA(cudaDeviceSynchronize());
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * Device info, for the fingerprint
 * ------------------------------------------------------------------- */

/* An attribute this device or runtime does not know is 0 = unknown, not
 * an error (CUDA 13 already dropped the matching cudaDeviceProp fields). */
static int device_attr(enum cudaDeviceAttr attr, int device, int *value)
{
    cudaError_t e = cudaDeviceGetAttribute(value, attr, device);

    if (e == cudaErrorInvalidValue) {
        cudaGetLastError();
        *value = 0;
        return TB_OK;
    }
    TB_CHECK_CUDA(e);
    return TB_OK;
}

/* "cuBLAS 13.1.0 cuDNN 9.x.y NCCL 2.28.z": none of these calls needs a
 * device or a handle. */
static int cuda_lib_versions(char *out, size_t cap)
{
    int bmaj = 0, bmin = 0, bpatch = 0, nccl = 0;
    size_t cudnn = cudnnGetVersion();

    TB_CHECK_CUBLAS(cublasGetProperty(MAJOR_VERSION, &bmaj));
    TB_CHECK_CUBLAS(cublasGetProperty(MINOR_VERSION, &bmin));
    TB_CHECK_CUBLAS(cublasGetProperty(PATCH_LEVEL, &bpatch));
    TB_CHECK_NCCL(ncclGetVersion(&nccl));
    /* NCCL encodes 2.8 and older as X*1000+Y*100+Z, later ones X*10000+Y*100+Z. */
    int nmaj = nccl >= 10000 ? nccl / 10000 : nccl / 1000;
    int nmin = nccl >= 10000 ? nccl % 10000 / 100 : nccl % 1000 / 100;
    /* cuDNN 9 encodes major*10000 + minor*100 + patch. */
    snprintf(out, cap, "cuBLAS %d.%d.%d cuDNN %zu.%zu.%zu NCCL %d.%d.%d", bmaj, bmin, bpatch,
             cudnn / 10000, cudnn % 10000 / 100, cudnn % 100, nmaj, nmin, nccl % 100);
    return TB_OK;
}

static int cuda_versions(tb_device_info *info)
{
    int runtime = 0, driver = 0;
    char nvml_driver[24]; /* "580.65.06" */

    TB_CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
    TB_CHECK_CUDA(cudaDriverGetVersion(&driver));
    TB_TRY(tb_nvml_driver_version(nvml_driver, sizeof nvml_driver));
    snprintf(info->runtime, sizeof info->runtime, "CUDA runtime %d.%d", runtime / 1000,
             runtime % 1000 / 10);
    /* The CUDA version the driver supports, plus its release number when
     * NVML can say (that is what people compare). */
    snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d%s%.20s%s", driver / 1000,
             driver % 1000 / 10, nvml_driver[0] ? " (" : "", nvml_driver,
             nvml_driver[0] ? ")" : "");
    return cuda_lib_versions(info->libs, sizeof info->libs);
}

static int cuda_device_info(tb_backend *be, tb_device_info *info)
{
    struct cudaDeviceProp prop;
    int dev = be->device;

    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "cuda");
    info->index = dev;
    TB_CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
    snprintf(info->name, sizeof info->name, "%.127s", prop.name);
    info->total_mem = prop.totalGlobalMem;
    TB_TRY(device_attr(cudaDevAttrMultiProcessorCount, dev, &info->multiprocessors));
    TB_TRY(device_attr(cudaDevAttrClockRate, dev, &info->clock_khz));
    TB_TRY(device_attr(cudaDevAttrMemoryClockRate, dev, &info->mem_clock_khz));
    TB_TRY(device_attr(cudaDevAttrGlobalMemoryBusWidth, dev, &info->mem_bus_bits));
    TB_TRY(device_attr(cudaDevAttrComputeCapabilityMajor, dev, &info->cc_major));
    TB_TRY(device_attr(cudaDevAttrComputeCapabilityMinor, dev, &info->cc_minor));
    TB_CHECK_CUDA(cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, dev));
    return cuda_versions(info);
}

/* ---------------------------------------------------------------------
 * Creation and destruction
 * ------------------------------------------------------------------- */

/* Frees whatever exists, also of a half-built backend; keeps going after
 * a failure and returns the first one. */
static int cuda_destroy(tb_backend *be)
{
    cuda_ctx *c;
    int rc = TB_OK, r;

    if (!be)
        return TB_OK;
    c = ctx_of(be);
    if (!c)
        goto out_free_backend;
    if (cudaSetDevice(be->device) != cudaSuccess)
        cudaGetLastError();
    /* Descriptors first (they hold no device memory of ours), then every
     * device segment: the scratch buffers and what the caller forgot. */
    if ((r = tb_cuda_conv_release(be)) != TB_OK && rc == TB_OK)
        rc = r;
    if ((r = tb_cuda_bn_release(be)) != TB_OK && rc == TB_OK)
        rc = r;
    tb_cuda_optim_release(be);
    if ((r = tb_cuda_alloc_release(be)) != TB_OK && rc == TB_OK)
        rc = r;
    if (c->cudnn && cudnnDestroy(c->cudnn) != CUDNN_STATUS_SUCCESS && rc == TB_OK)
        rc = TB_FAIL(TB_ERR_CUDNN, "cudnnDestroy failed");
    if (c->cublas && cublasDestroy(c->cublas) != CUBLAS_STATUS_SUCCESS && rc == TB_OK)
        rc = TB_FAIL(TB_ERR_CUBLAS, "cublasDestroy failed");
    if (c->peer_event) {
        cudaError_t e = cudaEventDestroy(c->peer_event);
        if (e != cudaSuccess && rc == TB_OK)
            rc = TB_FAIL(TB_ERR_CUDA, "cudaEventDestroy: %s", cudaGetErrorString(e));
    }
    if (c->compute) {
        cudaError_t e = cudaStreamDestroy(c->compute);
        if (e != cudaSuccess && rc == TB_OK)
            rc = TB_FAIL(TB_ERR_CUDA, "cudaStreamDestroy: %s", cudaGetErrorString(e));
    }
    free(c);
out_free_backend:
    free(be);
    return rc;
}

/* cuBLAS and cuDNN say NOT_INITIALIZED, not "no driver", when the GPU is
 * unusable: name the library and the device so the user knows what failed. */
static int handle_failed(int device, const char *lib, const char *call, int status,
                         const char *status_name)
{
    return TB_FAIL(TB_ERR_NO_DEVICE, "cuda:%d is not usable: %s could not start (%s: %s, status %d)",
                   device, lib, call, status_name, status);
}

static int cuda_open_handles(tb_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    cublasStatus_t bs;
    cudnnStatus_t ds;

    TB_CHECK_CUDA(cudaSetDevice(be->device));
    TB_CHECK_CUDA(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    bs = cublasCreate(&c->cublas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        c->cublas = NULL;
        return handle_failed(be->device, "cuBLAS", "cublasCreate", (int)bs,
                             cublasGetStatusString(bs));
    }
    TB_CHECK_CUBLAS(cublasSetStream(c->cublas, c->compute));
    ds = cudnnCreate(&c->cudnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        c->cudnn = NULL;
        return handle_failed(be->device, "cuDNN", "cudnnCreate", (int)ds,
                             cudnnGetErrorString(ds));
    }
    TB_CHECK_CUDNN(cudnnSetStream(c->cudnn, c->compute));
    TB_CHECK_CUDA(cudaEventCreateWithFlags(&c->peer_event, cudaEventDisableTiming));
    return TB_OK;
}

/* The kernels exist for sm_80 and newer only (tools/cuda.bzl): an older GPU
 * would fail at its first launch with "no kernel image"; say so up front. */
static int check_compute_capability(int ordinal)
{
    struct cudaDeviceProp prop;
    char why[512];

    TB_CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal));
    if (tb_cuda_verdict_device(ordinal, prop.name, prop.major, prop.minor, why, sizeof why) !=
        TB_CUDA_USABLE)
        return TB_FAIL(TB_ERR_NO_DEVICE, "%s", why);
    return TB_OK;
}

int tb_cuda_owns(const tb_backend *be) { return be && be->destroy == cuda_destroy; }

void tb_backend_cuda_fill_table(tb_backend *be)
{
    be->name = "cuda";
    be->host_alloc = cuda_host_alloc;
    be->host_free = cuda_host_free;
    be->copy_h2d = cuda_copy_h2d;
    be->copy_d2h = cuda_copy_d2h;
    be->copy_d2d = cuda_copy_d2d;
    be->copy_peer = cuda_copy_peer;
    be->memset = cuda_memset;
    be->stream_create = cuda_stream_create;
    be->stream_destroy = cuda_stream_destroy;
    be->stream_sync = cuda_stream_sync;
    be->event_create = cuda_event_create;
    be->event_destroy = cuda_event_destroy;
    be->event_record = cuda_event_record;
    be->stream_wait_event = cuda_stream_wait_event;
    be->event_sync = cuda_event_sync;
    be->event_elapsed_ms = cuda_event_elapsed_ms;
    be->sync = cuda_sync;
    be->device_info = cuda_device_info;
    be->destroy = cuda_destroy;
    tb_cuda_install_alloc(be);
    tb_cuda_install_gemm(be);
    tb_cuda_install_conv(be);
    tb_cuda_install_batchnorm(be);
    tb_cuda_install_elementwise(be);
    tb_cuda_install_gelu(be);
    tb_cuda_install_reduce(be);
    tb_cuda_install_dropout(be);
    tb_cuda_install_pool(be);
    tb_cuda_install_xent(be);
    tb_cuda_install_optim(be);
    tb_cuda_install_cast(be);
    tb_cuda_install_graph(be);
    tb_cuda_install_tokens(be);
    (void)tb_cuda_install_attn_ops(be); /* fills slots only; cannot fail */
}

/* REQUIRES: out != NULL. Fails with TB_ERR_NO_DEVICE, saying why, when the
 * driver, the device or cuBLAS/cuDNN on it is not usable; TB_ERR_INVALID
 * for a negative ordinal. On failure *out is NULL and nothing is leaked. */
int tb_backend_cuda_create(int ordinal, tb_backend **out)
{
    const char *why;
    tb_backend *be;
    int count, rc;

    if (!out)
        return TB_FAIL(TB_ERR_INVALID, "tb_backend_cuda_create: out is NULL");
    *out = NULL;
    if (ordinal < 0)
        return TB_FAIL(TB_ERR_INVALID, "cuda:%d: a device ordinal is 0 or more", ordinal);
    count = tb_cuda_device_count(&why);
    if (count == 0)
        return TB_FAIL(TB_ERR_NO_DEVICE, "cuda:%d requested, but %s", ordinal, why);
    if (ordinal >= count)
        return TB_FAIL(TB_ERR_NO_DEVICE, "cuda:%d requested, but this machine has %d CUDA device%s "
                       "(cuda:0 to cuda:%d)", ordinal, count, count == 1 ? "" : "s", count - 1);

    TB_TRY(check_compute_capability(ordinal));

    be = calloc(1, sizeof *be);
    if (!be)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate the CUDA backend");
    be->device = ordinal;
    be->ctx = calloc(1, sizeof(cuda_ctx));
    if (!be->ctx) {
        rc = TB_FAIL(TB_ERR_NOMEM, "cannot allocate the CUDA backend's state");
        goto out_destroy_backend;
    }
    tb_backend_cuda_fill_table(be);
    TB_TRY_GOTO(rc, cuda_open_handles(be), out_destroy_backend);
    *out = be;
    return TB_OK;

out_destroy_backend:
    /* The first failure is the one to report; destroy only adds to it. */
    cuda_destroy(be);
    return rc;
}
