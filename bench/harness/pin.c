/* pin.c - see pin.h (the rule and why the main thread stays free). */
#define _GNU_SOURCE
#include "bench/harness/pin.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_PIN_CPUS 1024

int tb_pin_threads(int threads, char *what, size_t cap)
{
    cpu_set_t allowed;
    int cpus[MAX_PIN_CPUS], n = 0;
    if (threads <= 0)
        threads = omp_get_max_threads();
    const char *bind = getenv("OMP_PROC_BIND");
    if (bind && *bind) {
        snprintf(what, cap, "none by tunebench: OMP_PROC_BIND=%s binds the OpenMP threads", bind);
        return 0;
    }
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        snprintf(what, cap, "none: sched_getaffinity failed");
        return 0;
    }
    for (int c = 0; c < CPU_SETSIZE && n < MAX_PIN_CPUS; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    if (n < 2 || threads < 2) {
        snprintf(what, cap, "none: %d thread(s) on %d allowed CPU(s)", threads, n);
        return 0;
    }
    int pinned = 0;
#pragma omp parallel num_threads(threads) reduction(+ : pinned)
    {
        int t = omp_get_thread_num();
        if (t > 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[t % n], &one);
            pinned += sched_setaffinity(0, sizeof one, &one) == 0;
        }
    }
    char list[64] = "";
    size_t len = 0;
    for (int i = 0; i < n && len + 12 < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", i ? "," : "", cpus[i]);
    snprintf(what, cap, "%d of %d OpenMP worker threads pinned (thread t to allowed CPU t mod %d; "
             "allowed: %s%s); main thread free", pinned, threads - 1, n, list,
             len + 12 >= sizeof list ? ",..." : "");
    return pinned;
}
