/* machine_probe_test.c - the probe's shape on whatever machine runs it:
 * positive medians, a pair ratio between 0.5 and 4 when two CPUs are
 * allowed (0 with one), a cache walk's time per load, and a CSV row with
 * the header's eleven fields.
 * Timings are not judged: a test cannot fail on a busy machine. */
#define _GNU_SOURCE /* fmemopen */
#include <stdio.h>
#include <string.h>

#include "bench/harness/machine_probe.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

static int fields(const char *line)
{
    int n = 1;
    for (const char *p = line; *p && *p != '\n'; p++)
        n += *p == ',';
    return n;
}

int main(void)
{
    tb_machine_probe p;
    tb_test_verbose = 1;
    int rc = tb_machine_probe_run(2, &p);
    if (rc != TB_OK)
        return tb_test_exit(rc);
    CHECK(p.cpus == 1 || p.cpus == 2, "cpus %d", p.cpus);
    CHECK(p.fma_alone_s > 0 && p.copy_alone_s > 0, "alone: fma %.2f ms, copy %.2f ms",
          1e3 * p.fma_alone_s, 1e3 * p.copy_alone_s);
    double fr = tb_machine_probe_fma_ratio(&p), cr = tb_machine_probe_copy_ratio(&p);
    if (p.cpus == 2)
        CHECK(fr > 0.5 && fr < 4 && cr > 0.5 && cr < 4, "pair ratios fma %.3f, copy %.3f", fr, cr);
    else
        CHECK(fr == 0 && cr == 0, "one CPU: no pair ratios");
    if (p.cpus == 2)
        CHECK(p.xcore_s > 1e-9 && p.xcore_s < 1e-4, "core-to-core round trip %.0f ns",
              1e9 * p.xcore_s);
    else
        CHECK(p.xcore_s == 0, "one CPU: no round trip");
    /* direct: more trips, same order of magnitude (a spin wait never sleeps) */
    double x = tb_machine_probe_xcore_s(1000);
    if (p.cpus == 2)
        CHECK(x > 1e-9 && x < 1e-4, "tb_machine_probe_xcore_s(1000): %.0f ns", 1e9 * x);
    CHECK(tb_machine_probe_xcore_s(3) == 0, "fewer trips than bursts: 0");
    char buf[1024] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tb_machine_probe_csv_header(f);
    tb_machine_probe_csv_row(f, "gelu", 12.5, &p);
    fclose(f);
    char *row = strchr(buf, '\n');
    CHECK(p.cache_load_s > 1e-10 && p.cache_load_s < 1e-5, "cache walk %.2f ns a load",
          1e9 * p.cache_load_s);
    CHECK(row && fields(buf) == 11 && fields(row + 1) == 11 && !strncmp(row + 1, "gelu,12.5,", 10),
          "CSV header and row of 11 fields: %s", buf);
    return tb_test_exit(TB_OK);
}
