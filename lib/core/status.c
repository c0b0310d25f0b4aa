/* status.c - the per-thread error chain behind TB_FAIL; see status.h. */
#include "lib/core/status.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#define TB_ERROR_DEPTH 16

typedef struct tb_error_entry {
    int code;
    const char *file;
    int line;
    char msg[1024]; /* room for two long paths (Bazel sandboxes nest deep) */
} tb_error_entry;

static _Thread_local tb_error_entry chain[TB_ERROR_DEPTH];
static _Thread_local int depth;

static int push_v(int code, const char *file, int line, const char *suffix,
                  const char *fmt, va_list ap)
{
    /* Keep the first (root cause) entries; later context overwrites the top. */
    int slot = depth < TB_ERROR_DEPTH ? depth++ : TB_ERROR_DEPTH - 1;
    tb_error_entry *e = &chain[slot];
    e->code = code;
    e->file = file;
    e->line = line;
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    if (suffix && n >= 0 && (size_t)n < sizeof e->msg)
        snprintf(e->msg + n, sizeof e->msg - (size_t)n, ": %s", suffix);
    return code;
}

int tb_error_push(int code, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_v(code, file, line, NULL, fmt, ap);
    va_end(ap);
    return code;
}

int tb_error_push_errno(int code, const char *file, int line, const char *fmt, ...)
{
    const char *why = strerror(errno);
    va_list ap;
    va_start(ap, fmt);
    push_v(code, file, line, why, fmt, ap);
    va_end(ap);
    return code;
}

const char *tb_err_name(int code)
{
    static const char *names[] = {
        "ok", "invalid argument", "i/o error", "corrupt data", "out of host memory",
        "out of device memory", "no device", "unsupported", "CUDA error",
        "cuBLAS error", "cuDNN error", "NCCL error", "MPI error", "oneDNN error",
        "NaN/Inf found", "interrupted", "timed out", "internal error",
    };
    if (code < 0 || code >= (int)(sizeof names / sizeof names[0]))
        return "unknown error";
    return names[code];
}

int tb_error_last(void) { return depth ? chain[depth - 1].code : TB_OK; }
const char *tb_error_message(void) { return depth ? chain[depth - 1].msg : ""; }
int tb_error_depth(void) { return depth; }
void tb_error_clear(void) { depth = 0; }

void tb_error_print(FILE *f)
{
    for (int i = depth - 1; i >= 0; i--) {
        const tb_error_entry *e = &chain[i];
        const char *base = strrchr(e->file, '/');
        base = base ? base + 1 : e->file;
        fprintf(f, "%s %s (%s, %s:%d)\n", i == depth - 1 ? "error:" : "  from:",
                e->msg, tb_err_name(e->code), base, e->line);
    }
}

int tb_exit_code(int code)
{
    switch (code) {
    case TB_OK: return 0;
    case TB_ERR_INVALID:
    case TB_ERR_NO_DEVICE:
    case TB_ERR_UNSUPPORTED: return 2; /* asked for what this device cannot do */
    case TB_ERR_INTERRUPTED: return 130;
    default: return 1;
    }
}
