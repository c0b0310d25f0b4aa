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

/* [default,full,tiny,gpu] */
static void put_profiles(FILE *f, const double v[TB_PROFILES])
{
    for (int p = 0; p < TB_PROFILES; p++)
        fprintf(f, "%s%g", p ? "," : "[", v[p]);
    fputc(']', f);
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
    fputs(",\"headline_metric\":", f);
    put_string_or_null(f, t->headline_metric);
    fputs(",\"est_seconds\":", f);
    put_profiles(f, t->est_seconds);
    fputs(",\"budget_seconds\":", f);
    put_profiles(f, t->budget_seconds);
    fprintf(f, ",\"order\":%d,\"after\":[", t->order);
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
    fputs("},\"gpu_workloads\":", f);
    put_string_or_null(f, t->gpu_workloads);
    fputs("}\n", f);
    if (fflush(f) != 0 || ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write the description of %s", t->name);
    return TB_OK;
}

void tb_profile_resolve(int *profile, const char *backend, const char *who)
{
    int cuda = strcmp(backend, "cuda") == 0;
    if (*profile == TB_PROFILE_AUTO) {
        *profile = cuda ? TB_PROFILE_GPU : TB_PROFILE_DEFAULT;
        if (cuda)
            fprintf(stderr, "%s: profile gpu, chosen because the CUDA backend is active (the "
                    "real ResNet-50 and GPT-2 at batches for an 80 GB GPU; --profile=default "
                    "for the short one)\n", who);
    } else if (*profile == TB_PROFILE_GPU && !cuda) {
        fprintf(stderr, "%s: WARNING: profile gpu on the %s backend: it is sized for one 80 GB "
                "GPU (ResNet-50 224x224 batch 64, GPT-2 context 1024 batch 4) and will take "
                "far longer here than its budgets say\n", who, backend);
    }
}

int tb_technique_wants_describe(int argc, char *const *argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--describe") == 0)
            return 1;
    return 0;
}
