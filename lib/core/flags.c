/* flags.c - see flags.h. */
#include "lib/core/flags.h"

#include <errno.h>
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

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
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
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int set_value(const tb_flag *f, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case TB_FLAG_BOOL:
        if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
            *(int *)f->value = 1;
        else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
            *(int *)f->value = 0;
        else
            return -1;
        return 0;
    case TB_FLAG_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < -2147483647L || x > 2147483647L)
            return -1;
        *(int *)f->value = (int)x;
        return 0;
    }
    case TB_FLAG_LONG: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno)
            return -1;
        *(long long *)f->value = x;
        return 0;
    }
    case TB_FLAG_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || errno)
            return -1;
        *(double *)f->value = x;
        return 0;
    }
    case TB_FLAG_STRING:
        *(const char **)f->value = v;
        return 0;
    case TB_FLAG_SIZE:
        return parse_size(v, (size_t *)f->value);
    case TB_FLAG_BOOL_AUTO:
        if (!strcasecmp(v, "auto")) {
            *(int *)f->value = TB_FLAG_AUTO;
            return 0;
        }
        return set_value(&(tb_flag){f->name, TB_FLAG_BOOL, f->value, f->help, NULL}, v);
    case TB_FLAG_CHOICE:
        for (int i = 0; f->choices && f->choices[i]; i++)
            if (!strcmp(f->choices[i], v)) {
                *(int *)f->value = i;
                return 0;
            }
        return -1;
    }
    return -1;
}

static void expected(const tb_flag *f, char *out, size_t cap)
{
    static const char *what[] = {"true or false", "an integer", "an integer", "a number",
                                 "a string", "a size like 512M or 2G", "",
                                 "true, false or auto"};
    if (f->kind != TB_FLAG_CHOICE) {
        snprintf(out, cap, "%s", what[f->kind]);
        return;
    }
    size_t len = (size_t)snprintf(out, cap, "one of");
    for (int i = 0; f->choices[i] && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, " %s", f->choices[i]);
}

int tb_flag_set(const tb_flag *f, const char *text)
{
    if (set_value(f, text) != 0) {
        char want[256];
        expected(f, want, sizeof want);
        return TB_FAIL(TB_ERR_INVALID, "bad value '%s' for --%s: expected %s", text, f->name,
                       want);
    }
    return TB_OK;
}

int tb_flags_parse(const tb_flag *flags, size_t nflags, int *argc, char **argv,
                   const char *pass_prefix, int *help_asked)
{
    int out = 1;
    *help_asked = 0;
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
        if (!f && !eq && !strncmp(name, "no-", 3)) {
            f = find(flags, nflags, name + 3, len - 3);
            if (f && (f->kind == TB_FLAG_BOOL || f->kind == TB_FLAG_BOOL_AUTO)) {
                *(int *)f->value = 0;
                continue;
            }
            f = NULL;
        }
        if (!f)
            return TB_FAIL(TB_ERR_INVALID, "unknown flag '%s'; see --help for the flags", a);
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
        fprintf(f, "  %-26s %s [%s]%s%s\n", left, flags[i].help, def,
                flags[i].kind == TB_FLAG_CHOICE ? "; " : "",
                flags[i].kind == TB_FLAG_CHOICE ? want : "");
    }
}
