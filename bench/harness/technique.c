/* technique.c - see technique.h. */
#include "bench/harness/technique.h"

#include <string.h>

#include "lib/core/json.h"
#include "lib/core/status.h"

const char *tb_technique_results(const tb_technique *t)
{
    return t->results ? t->results : t->name;
}

static void put_string_or_null(FILE *f, const char *s)
{
    if (s)
        tb_json_write_string(f, s);
    else
        fputs("null", f);
}

int tb_technique_describe(const tb_technique *t, FILE *f)
{
    fputs("{\"name\":", f);
    tb_json_write_string(f, t->name);
    fputs(",\"results\":", f);
    tb_json_write_string(f, tb_technique_results(t));
    fputs(",\"what\":", f);
    put_string_or_null(f, t->what);
    fputs(",\"headline\":", f);
    put_string_or_null(f, t->headline);
    fprintf(f, ",\"est_seconds\":[%g,%g,%g],\"budget_seconds\":[%g,%g,%g],\"order\":%d,"
            "\"after\":[", t->est_seconds[0], t->est_seconds[1], t->est_seconds[2],
            t->budget_seconds[0], t->budget_seconds[1], t->budget_seconds[2], t->order);
    for (int i = 0; i < TB_MAX_AFTER && t->after[i]; i++) {
        if (i)
            fputc(',', f);
        tb_json_write_string(f, t->after[i]);
    }
    fprintf(f, "],\"tiny\":{\"min_rows\":%d,\"plots\":", t->tiny.min_rows);
    tb_json_write_string(f, t->tiny.plots ? t->tiny.plots : "");
    fputs(",\"na_note\":", f);
    put_string_or_null(f, t->tiny.na_note);
    fprintf(f, ",\"gbench\":%s,\"workloads\":", t->tiny.no_gbench ? "false" : "true");
    put_string_or_null(f, t->tiny.workloads);
    fputs("}}\n", f);
    if (fflush(f) != 0 || ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write the description of %s", t->name);
    return TB_OK;
}

int tb_technique_wants_describe(int argc, char *const *argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--describe") == 0)
            return 1;
    return 0;
}
