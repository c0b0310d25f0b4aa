/*
 * memavail.c - how much memory the CPU backend may count out before the
 * kernel's out-of-memory killer would end the process (see cpu.h).
 *
 * Linux overcommits: a malloc of 20 GB on a 24 GB machine succeeds, and the
 * process is killed minutes later, silently, when the pages are touched. The
 * backend's allocator therefore refuses, as out of memory, what would take
 * its count past what this returns. Tested by backend_cpu_test through
 * TB_TEST_MEMINFO (a file read instead of /proc/meminfo).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lib/backend/cpu/cpu.h"

/* MemAvailable of a /proc/meminfo-shaped file in bytes; 0 when absent. */
static size_t meminfo_available(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

size_t tb_cpu_mem_budget(const char **source)
{
    const char *path = getenv("TB_TEST_MEMINFO");
    size_t avail = meminfo_available(path && *path ? path : "/proc/meminfo");
    /* the rest of the process (data, loader buffers, libraries) lives
     * beside what the allocator counts: leave it a sixteenth */
    size_t budget = avail - avail / 16;
    *source = "MemAvailable in /proc/meminfo";
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t as = (size_t)rl.rlim_cur - (size_t)rl.rlim_cur / 4;
        if (budget == 0 || as < budget) {
            budget = as;
            *source = "the address-space limit (ulimit -v)";
        }
    }
    return budget;
}
