/* techniques.c - the technique list for bench:all; see techniques.h. */
#include "bench/techniques.h"

const tb_technique_entry tb_techniques[] = {
    {"gelu", "fused vs unfused GELU, forward and backward, over tensor sizes", {40, 240, 5}},
};

const int tb_technique_count = sizeof tb_techniques / sizeof tb_techniques[0];
