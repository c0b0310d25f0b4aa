/* device_toggle.c - see device_toggle.h. */
#include "bench/harness/device_toggle.h"

#include <stdio.h>
#include <string.h>

/* The settings' callbacks take no entry argument: one toggle per process. */
static const tb_device_toggle *chosen;

static void set_toggle(tb_config *cfg, double on)
{
    *(int *)((char *)cfg + chosen->field) = on != 0;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (s->param == 0 || strcmp(backend, "cpu") != 0)
        return NULL;
    return chosen->cpu_reason;
}

static int on_note(tb_step_ctx *c, char *note, size_t cap)
{
    if (c->setting->param != 0 && chosen->on_note)
        snprintf(note, cap, "%s", chosen->on_note);
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_toggle, NULL, NULL},
    {"on", 1, 0, set_toggle, NULL, NULL},
};

int tb_device_toggle_main(const tb_device_toggle *toggle, int argc, char **argv)
{
    chosen = toggle;
    const tb_step_technique tech = {
        .desc = toggle->desc,
        .param_name = "on",
        TB_STEP_SETTINGS(settings),
        .metric = TB_METRIC_STEP,
        .workloads = toggle->workloads,
        .setup = toggle->setup,
        .na_reason = na_reason,
        .tolerance = 0,
        .tolerance_why = toggle->tolerance_why,
        .check_note = toggle->on_note ? on_note : NULL,
    };
    return tb_step_main(&tech, argc, argv);
}
