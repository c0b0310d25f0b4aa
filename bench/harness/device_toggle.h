/*
 * device_toggle.h - a training-step technique that is one on/off int field
 * of tb_config and means something only where host and device memory are
 * apart (bench/techniques/{tensors_on_device,augment_on_device,
 * cuda_graphs}.c). Settings "off" (the baseline) and "on"; on the CPU
 * backend "on" is an n/a row with the entry's reason, the baseline is still
 * timed. The toggles give bitwise-equal losses, so the tolerance is 0.
 */
#ifndef TB_BENCH_DEVICE_TOGGLE_H
#define TB_BENCH_DEVICE_TOGGLE_H

#include <stddef.h>

#include "bench/harness/step_harness.h"

typedef struct tb_device_toggle {
    tb_technique desc;
    size_t field;             /* offsetof(tb_config, the int toggle) */
    const char *cpu_reason;   /* why "on" means nothing on the CPU backend */
    const char *tolerance_why;
    /* Where "on" leaves part of the tip out, the on row's note says what
     * (cuda_graphs: what its graph captures and what runs outside it);
     * NULL: nothing. */
    const char *on_note;
    unsigned workloads;       /* tb_step_technique's: 0 the small CNN */
    /* tb_step_technique's: what both settings need (augment_on_device: the
     * augmentation itself, on, that "on" moves to the device); NULL: none */
    void (*setup)(tb_config *cfg, int profile);
} tb_device_toggle;

/* main() of such a technique: tb_step_main on the two settings. Returns the
 * exit code. REQUIRES: toggle lives until it returns. */
int tb_device_toggle_main(const tb_device_toggle *toggle, int argc, char **argv);

/* The main() of a technique file that is one tb_device_toggle. */
#define TB_DEVICE_TOGGLE_MAIN(toggle)                                                             \
    int main(int argc, char **argv) { return tb_device_toggle_main(&(toggle), argc, argv); }

#endif
