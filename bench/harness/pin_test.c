/*
 * pin_test.c - tb_pin_threads (bench/harness/pin.h): each OpenMP worker
 * thread ends up on one allowed CPU, the one the rule names; the main
 * thread keeps its whole mask; OMP_PROC_BIND turns it off.
 *
 * Run: bazel test //bench/harness:pin_test
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdlib.h>

#include "bench/harness/pin.h"
#include "lib/core/testing.h"

int main(void)
{
    char what[256];
    cpu_set_t before, after;
    CPU_ZERO(&before);
    sched_getaffinity(0, sizeof before, &before);
    int n = CPU_COUNT(&before), cpus[CPU_SETSIZE], k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &before))
            cpus[k++] = c;

    setenv("OMP_PROC_BIND", "close", 1);
    CHECK(tb_pin_threads(3, what, sizeof what) == 0, "OMP_PROC_BIND set: nothing pinned (%s)",
          what);
    unsetenv("OMP_PROC_BIND");
    CHECK(tb_pin_threads(1, what, sizeof what) == 0, "one thread: nothing pinned (%s)", what);

    int pinned = tb_pin_threads(3, what, sizeof what);
    printf("pin: %s\n", what);
    if (n < 2) {
        CHECK(pinned == 0, "one allowed CPU: nothing pinned");
        return tb_test_exit(TB_OK);
    }
    CHECK(pinned == 2, "both worker threads pinned (%d): %s", pinned, what);
    int ok[3] = {0, 0, 0};
#pragma omp parallel num_threads(3)
    {
        int t = omp_get_thread_num();
        cpu_set_t s;
        CPU_ZERO(&s);
        sched_getaffinity(0, sizeof s, &s);
        if (t == 0)
            ok[t] = CPU_EQUAL(&s, &before);
        else
            ok[t] = CPU_COUNT(&s) == 1 && CPU_ISSET(cpus[t % n], &s);
    }
    CHECK(ok[0], "the main thread keeps its whole mask");
    CHECK(ok[1] && ok[2], "worker t runs on allowed CPU t mod n only");
    CPU_ZERO(&after);
    sched_getaffinity(0, sizeof after, &after);
    CHECK(CPU_EQUAL(&after, &before), "the main thread's mask is unchanged afterwards");
    return tb_test_exit(TB_OK);
}
