/*
 * status.h - how errors travel up in tunebench.
 *
 * Every function in lib/ returns an int status: 0 (TB_OK) or a tb_err code.
 * The place that first sees a failure calls TB_FAIL(code, fmt, ...), which
 * records file, line and message on a per-thread error chain and returns the
 * code; callers that pass an error on may add context with TB_FAIL again.
 * bench/ prints the chain with tb_error_print() and exits non-zero.
 * lib/ never calls exit().
 *
 * One checking macro per API lives with the code that uses that API:
 * TB_CHECK_IO here, TB_CHECK_CUDA / _CUBLAS / _CUDNN / _NCCL in
 * lib/backend/cuda/check.h, TB_CHECK_MPI with the MPI code, TB_CHECK_DNNL in lib/backend/cpu/dnnl.h.
 */
#ifndef TB_STATUS_H
#define TB_STATUS_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_err {
    TB_OK = 0,
    TB_ERR_INVALID = 1,      /* bad argument or flag */
    TB_ERR_IO = 2,           /* file missing, unreadable, unwritable */
    TB_ERR_DATA = 3,         /* corrupt or truncated input file */
    TB_ERR_NOMEM = 4,        /* host allocation failed */
    TB_ERR_DEVICE_OOM = 5,   /* device allocation failed or --mem-limit hit */
    TB_ERR_NO_DEVICE = 6,    /* requested device not usable */
    TB_ERR_UNSUPPORTED = 7,  /* op or dtype not available on this backend */
    TB_ERR_CUDA = 8,
    TB_ERR_CUBLAS = 9,
    TB_ERR_CUDNN = 10,
    TB_ERR_NCCL = 11,
    TB_ERR_MPI = 12,
    TB_ERR_DNNL = 13,
    TB_ERR_NUMERIC = 14,     /* NaN/Inf found (anomaly detection) */
    TB_ERR_INTERRUPTED = 15, /* SIGINT/SIGTERM seen */
    TB_ERR_TIMEOUT = 16,
    TB_ERR_INTERNAL = 17,
} tb_err;

/* Records an error (code, place, message) and returns code. */
int tb_error_push(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define TB_FAIL(code, ...) tb_error_push((code), __FILE__, __LINE__, __VA_ARGS__)

/* Stdio and POSIX calls: expr true means failure; errno is reported. */
#define TB_CHECK_IO(cond, ...)                                              \
    do {                                                                    \
        if (cond)                                                           \
            return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__,       \
                                       __VA_ARGS__);                        \
    } while (0)

int tb_error_push_errno(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Propagates a non-zero status from a callee, adding nothing. */
#define TB_TRY(expr)                  \
    do {                              \
        int tb_try_rc_ = (expr);      \
        if (tb_try_rc_ != TB_OK)      \
            return tb_try_rc_;        \
    } while (0)

/* Same, but jumps to a cleanup label with rc set. */
#define TB_TRY_GOTO(rc, expr, label) \
    do {                             \
        (rc) = (expr);               \
        if ((rc) != TB_OK)           \
            goto label;              \
    } while (0)

const char *tb_err_name(int code);
int tb_error_last(void);       /* code of the newest entry, or TB_OK */
const char *tb_error_message(void); /* newest message, or "" */
int tb_error_depth(void);
void tb_error_clear(void);
/* Prints the chain, newest first: "error: MSG (file:line)" then "  from: ...". */
void tb_error_print(FILE *f);

/* Exit code bench/ uses for a status: 2 for usage/device errors (including a
 * toggle the device does not support, e.g. --amp=fp16 on the CPU), 1 otherwise. */
int tb_exit_code(int code);

#ifdef __cplusplus
}
#endif
#endif
