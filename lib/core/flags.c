/* flags.c - see flags.h. */
#include "lib/core/flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/core/status.h"

static const tb_flag *find(const tb_flag *flags, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

/* 2^64 as a double: the first value a size_t cannot hold. */
#define SIZE_LIMIT 18446744073709551616.0

/* Each parser returns NULL, or why text is not a value of its kind. */
static const char *parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s)
        return "not a size";
    if (!isfinite(v))
        return "not a finite size";
    if (v < 0)
        return "a size cannot be negative";
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end)
        return "not a size";
    /* converting a double at or past 2^64 to size_t is undefined */
    if (errno || v * mul >= SIZE_LIMIT)
        return "too large for a size";
    *out = (size_t)(v * mul);
    return NULL;
}

static const char *parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end)
        return "not a number";
    if (!isfinite(x) || errno == ERANGE)
        return "not a finite number";
    *out = x;
    return NULL;
}

static const char *parse_long(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        return "not an integer";
    if (errno || x < lo || x > hi)
        return "out of range";
    *out = x;
    return NULL;
}

static const char *parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
        *out = 1;
    else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
        *out = 0;
    else
        return "not a boolean";
    return NULL;
}

static int in_range(const tb_flag_range *r, double x)
{
    if (!r)
        return 1;
    int above = r->min_open ? x > r->min : x >= r->min;
    int below = r->max_open ? x < r->max : x <= r->max;
    return above && below;
}

/* Parses v as f's kind into *val (the widest type the kind needs) and checks
 * f's range; stores nothing. */
typedef union flag_val {
    int i;
    long long l;
    double d;
    size_t z;
    const char *s;
} flag_val;

static const char *parse_value(const tb_flag *f, const char *v, flag_val *val)
{
    const char *why = NULL;
    double x = 0;
    switch (f->kind) {
    case TB_FLAG_BOOL:
        return parse_bool(v, &val->i);
    case TB_FLAG_BOOL_AUTO:
        if (!strcasecmp(v, "auto")) {
            val->i = TB_FLAG_AUTO;
            return NULL;
        }
        return parse_bool(v, &val->i);
    case TB_FLAG_STRING:
        val->s = v;
        return NULL;
    case TB_FLAG_CHOICE:
        for (int i = 0; f->choices && f->choices[i]; i++)
            if (!strcmp(f->choices[i], v)) {
                val->i = i;
                return NULL;
            }
        return "not one of the choices";
    case TB_FLAG_INT:
        why = parse_long(v, INT_MIN, INT_MAX, &val->l);
        val->i = (int)val->l;
        x = (double)val->l;
        break;
    case TB_FLAG_LONG:
        why = parse_long(v, LLONG_MIN, LLONG_MAX, &val->l);
        x = (double)val->l;
        break;
    case TB_FLAG_DOUBLE_AUTO:
        if (!strcasecmp(v, "auto")) {
            val->d = TB_FLAG_UNSET;
            return NULL;
        }
        /* fall through */
    case TB_FLAG_DOUBLE:
        why = parse_double(v, &val->d);
        x = val->d;
        break;
    case TB_FLAG_SIZE:
        why = parse_size(v, &val->z);
        x = (double)val->z;
        break;
    }
    if (why)
        return why;
    return in_range(f->range, x) ? NULL : "out of range";
}

static void store(const tb_flag *f, const flag_val *val)
{
    switch (f->kind) {
    case TB_FLAG_BOOL: case TB_FLAG_BOOL_AUTO: case TB_FLAG_INT: case TB_FLAG_CHOICE:
        *(int *)f->value = val->i;
        break;
    case TB_FLAG_LONG: *(long long *)f->value = val->l; break;
    case TB_FLAG_DOUBLE: case TB_FLAG_DOUBLE_AUTO: *(double *)f->value = val->d; break;
    case TB_FLAG_SIZE: *(size_t *)f->value = val->z; break;
    case TB_FLAG_STRING: *(const char **)f->value = val->s; break;
    }
}

/* A bound as the flag's kind writes it: 4096, 0.5, 1G. */
static void bound_str(const tb_flag *f, double v, char *out, size_t cap)
{
    if (f->kind == TB_FLAG_SIZE && v >= 1024 && fmod(v, 1024) == 0) {
        static const char *const unit[] = {"K", "M", "G", "T"};
        int u = 0;
        v /= 1024;
        while (u < 3 && v >= 1024 && fmod(v, 1024) == 0) {
            v /= 1024;
            u++;
        }
        snprintf(out, cap, "%.0f%s", v, unit[u]);
    } else {
        snprintf(out, cap, f->kind == TB_FLAG_DOUBLE || f->kind == TB_FLAG_DOUBLE_AUTO ? "%g"
                                                                                       : "%.0f", v);
    }
}

/* " in 0..4096", " in [0, 1)", " > 0", " >= 1", or "" without a range. */
static void range_str(const tb_flag *f, char *out, size_t cap)
{
    const tb_flag_range *r = f->range;
    out[0] = 0;
    if (!r)
        return;
    char lo[32], hi[32];
    bound_str(f, r->min, lo, sizeof lo);
    bound_str(f, r->max, hi, sizeof hi);
    int real = f->kind == TB_FLAG_DOUBLE || f->kind == TB_FLAG_DOUBLE_AUTO;
    if (isinf(r->max))
        snprintf(out, cap, " %s %s", r->min_open ? ">" : ">=", lo);
    else if (real || r->min_open || r->max_open)
        snprintf(out, cap, " in %s%s, %s%s", r->min_open ? "(" : "[", lo, hi,
                 r->max_open ? ")" : "]");
    else
        snprintf(out, cap, " in %s..%s", lo, hi);
}

static void expected(const tb_flag *f, char *out, size_t cap)
{
    static const char *what[] = {"true or false", "an integer", "an integer", "a finite number",
                                 "a string", "a size like 512M or 2G", "",
                                 "true, false or auto", "auto or a finite number"};
    if (f->kind != TB_FLAG_CHOICE) {
        char range[96];
        range_str(f, range, sizeof range);
        snprintf(out, cap, "%s%s", what[f->kind], range);
        return;
    }
    size_t len = (size_t)snprintf(out, cap, "one of");
    for (int i = 0; f->choices[i] && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, " %s", f->choices[i]);
}

int tb_flag_set(const tb_flag *f, const char *text)
{
    flag_val val;
    memset(&val, 0, sizeof val);
    const char *why = parse_value(f, text, &val);
    if (why) {
        char want[256];
        expected(f, want, sizeof want);
        return TB_FAIL(TB_ERR_INVALID, "--%s=%s: %s (expected %s)", f->name, text, why, want);
    }
    store(f, &val);
    return TB_OK;
}

int tb_flag_check(const tb_flag *f)
{
    double x;
    const char *why = NULL;
    switch (f->kind) {
    case TB_FLAG_INT: x = *(int *)f->value; break;
    case TB_FLAG_LONG: x = (double)*(long long *)f->value; break;
    case TB_FLAG_SIZE: x = (double)*(size_t *)f->value; break;
    case TB_FLAG_DOUBLE_AUTO:
    case TB_FLAG_DOUBLE:
        x = *(double *)f->value;
        if (f->kind == TB_FLAG_DOUBLE_AUTO && tb_flag_unset(x))
            return TB_OK;
        if (!isfinite(x))
            why = "not a finite number";
        break;
    default: return TB_OK;
    }
    if (!why && !in_range(f->range, x))
        why = "out of range";
    if (!why)
        return TB_OK;
    char want[256], val[64];
    expected(f, want, sizeof want);
    tb_flag_value_str(f, val, sizeof val);
    return TB_FAIL(TB_ERR_INVALID, "--%s=%s: %s (expected %s)", f->name, val, why, want);
}

int tb_flags_keep_argv(int argc, char *const *argv, char **out, int cap)
{
    int n = argc < cap - 1 ? argc : cap - 1;
    for (int i = 0; i < n; i++)
        out[i] = argv[i];
    out[n] = NULL;
    return n;
}

#define TB_FLAGS_MAX_SEEN 128 /* flags of one parse tracked for repeats */

int tb_flags_parse(const tb_flag *flags, size_t nflags, int *argc, char **argv,
                   const char *pass_prefix, int *help_asked)
{
    int out = 1;
    *help_asked = 0;
    /* how each flag was given (NULL: not yet): a second time is refused,
     * not silently the last (--skip=a --skip=b skipped b alone) */
    const char *given[TB_FLAGS_MAX_SEEN] = {0};
    for (int i = 1; i < *argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help_asked = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
            argv[out++] = a;
            continue;
        }
        const char *name = a + 2;
        if (pass_prefix && !strncmp(name, pass_prefix, strlen(pass_prefix))) {
            argv[out++] = a;
            continue;
        }
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const tb_flag *f = find(flags, nflags, name, len);
        const char *value = eq ? eq + 1 : NULL;
        int negated = 0;
        if (!f && !eq && !strncmp(name, "no-", 3)) {
            f = find(flags, nflags, name + 3, len - 3);
            negated = f && (f->kind == TB_FLAG_BOOL || f->kind == TB_FLAG_BOOL_AUTO);
            if (!negated)
                f = NULL;
        }
        if (!f)
            return TB_FAIL(TB_ERR_INVALID, "unknown flag '%s'; see --help for the flags", a);
        size_t k = (size_t)(f - flags);
        if (k < TB_FLAGS_MAX_SEEN && given[k])
            return TB_FAIL(TB_ERR_INVALID, "flag --%s given twice ('%s', then '%s'): give it "
                           "once%s", f->name, given[k], a,
                           f->kind == TB_FLAG_STRING ? " (several values: one comma-separated "
                                                       "list, where the flag takes one)" : "");
        if (k < TB_FLAGS_MAX_SEEN)
            given[k] = a;
        if (negated) {
            *(int *)f->value = 0;
            continue;
        }
        if (!value && (f->kind == TB_FLAG_BOOL || f->kind == TB_FLAG_BOOL_AUTO)) {
            *(int *)f->value = 1;
            continue;
        }
        if (!value) {
            if (i + 1 >= *argc)
                return TB_FAIL(TB_ERR_INVALID, "flag --%s needs a value", f->name);
            value = argv[++i];
        }
        TB_TRY(tb_flag_set(f, value));
    }
    argv[out] = NULL;
    *argc = out;
    return TB_OK;
}

void tb_flag_value_str(const tb_flag *f, char *out, size_t cap)
{
    switch (f->kind) {
    case TB_FLAG_BOOL: snprintf(out, cap, "%s", *(int *)f->value ? "true" : "false"); break;
    case TB_FLAG_INT: snprintf(out, cap, "%d", *(int *)f->value); break;
    case TB_FLAG_LONG: snprintf(out, cap, "%lld", *(long long *)f->value); break;
    case TB_FLAG_DOUBLE: snprintf(out, cap, "%g", *(double *)f->value); break;
    case TB_FLAG_DOUBLE_AUTO: {
        double v = *(double *)f->value;
        if (tb_flag_unset(v))
            snprintf(out, cap, "auto");
        else
            snprintf(out, cap, "%g", v);
        break;
    }
    case TB_FLAG_STRING: {
        const char *s = *(const char **)f->value;
        snprintf(out, cap, "%s", s ? s : "");
        break;
    }
    case TB_FLAG_SIZE: {
        size_t v = *(size_t *)f->value;
        if (v && v % (1024u * 1024 * 1024) == 0)
            snprintf(out, cap, "%zuG", v >> 30);
        else if (v && v % (1024u * 1024) == 0)
            snprintf(out, cap, "%zuM", v >> 20);
        else
            snprintf(out, cap, "%zu", v);
        break;
    }
    case TB_FLAG_CHOICE: snprintf(out, cap, "%s", f->choices[*(int *)f->value]); break;
    case TB_FLAG_BOOL_AUTO: {
        int v = *(int *)f->value;
        snprintf(out, cap, "%s", v == TB_FLAG_AUTO ? "auto" : v ? "true" : "false");
        break;
    }
    }
}

void tb_flags_usage(FILE *f, const char *prog, const char *summary, const tb_flag *flags,
                    size_t nflags)
{
    fprintf(f, "usage: %s [flags]\n%s\n\nflags (default in brackets):\n", prog, summary);
    for (size_t i = 0; i < nflags; i++) {
        char def[64], want[256];
        tb_flag_value_str(&flags[i], def, sizeof def);
        expected(&flags[i], want, sizeof want);
        char left[64];
        snprintf(left, sizeof left, "--%s", flags[i].name);
        /* the choices, or the values a ranged number takes */
        int show = flags[i].kind == TB_FLAG_CHOICE || flags[i].range;
        fprintf(f, "  %-26s %s [%s]%s%s\n", left, flags[i].help, def, show ? "; " : "",
                show ? want : "");
    }
}
