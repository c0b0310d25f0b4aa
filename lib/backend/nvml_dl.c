/*
 * nvml_dl.c - NVML through dlopen: see nvml_dl.h for why.
 *
 * There is no nvml.h on the build machines, so the few types and entry
 * points used are declared here from NVML's documented C ABI: every call
 * returns an nvmlReturn_t (an int enum, 0 = NVML_SUCCESS) and a device is an
 * opaque pointer. Only functions that exist since long-gone driver releases
 * are required; the clocks-event query has a newer name and an older one,
 * and either will do.
 */
#include "lib/backend/nvml_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/status.h"

typedef int nvml_return;                       /* nvmlReturn_t */
typedef struct nvml_device_st *nvml_device;    /* nvmlDevice_t */

enum { NVML_SUCCESS = 0 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };   /* nvmlClockType_t */
enum { NVML_TEMPERATURE_GPU = 0 };                /* nvmlTemperatureSensors_t */

typedef struct nvml_api {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*handle_by_index)(unsigned, nvml_device *);
    nvml_return (*handle_by_pci)(const char *, nvml_device *);
    nvml_return (*clock_info)(nvml_device, int, unsigned *);
    nvml_return (*temperature)(nvml_device, int, unsigned *);
    nvml_return (*power_usage)(nvml_device, unsigned *);
    nvml_return (*power_limit)(nvml_device, unsigned *);
    nvml_return (*throttle_reasons)(nvml_device, unsigned long long *);
    nvml_return (*driver_version)(char *, unsigned);
} nvml_api;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static nvml_api nvml;
static int nvml_ok;
static char nvml_why[256] = "NVML not available (not loaded yet)";

/* dlsym into a function pointer without the object/function pointer cast
 * that ISO C leaves undefined (POSIX guarantees the representation). */
static int nvml_sym(void *lib, const char *name, void *fn_ptr)
{
    void *sym = dlsym(lib, name);
    memcpy(fn_ptr, &sym, sizeof sym);
    return sym != NULL;
}

static int nvml_bind(void *lib)
{
    int ok = 1;
    ok &= nvml_sym(lib, "nvmlInit_v2", &nvml.init);
    ok &= nvml_sym(lib, "nvmlShutdown", &nvml.shutdown);
    ok &= nvml_sym(lib, "nvmlErrorString", &nvml.error_string);
    ok &= nvml_sym(lib, "nvmlDeviceGetHandleByIndex_v2", &nvml.handle_by_index);
    ok &= nvml_sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", &nvml.handle_by_pci);
    ok &= nvml_sym(lib, "nvmlDeviceGetClockInfo", &nvml.clock_info);
    ok &= nvml_sym(lib, "nvmlDeviceGetTemperature", &nvml.temperature);
    ok &= nvml_sym(lib, "nvmlDeviceGetPowerUsage", &nvml.power_usage);
    ok &= nvml_sym(lib, "nvmlDeviceGetEnforcedPowerLimit", &nvml.power_limit);
    ok &= nvml_sym(lib, "nvmlSystemGetDriverVersion", &nvml.driver_version);
    /* Renamed in driver 535; older drivers only have the first name. */
    if (!nvml_sym(lib, "nvmlDeviceGetCurrentClocksEventReasons", &nvml.throttle_reasons))
        nvml_sym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &nvml.throttle_reasons);
    return ok;
}

static void nvml_load(void)
{
    /* RTLD_LOCAL: NVML's symbols stay out of the global namespace. */
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(nvml_why, sizeof nvml_why, "NVML not available (%s)", dlerror());
        return;
    }
    if (!nvml_bind(lib)) {
        snprintf(nvml_why, sizeof nvml_why,
                 "NVML not available (libnvidia-ml.so.1 lacks an entry point tunebench needs)");
        dlclose(lib);
        return;
    }
    nvml_return r = nvml.init();
    if (r != NVML_SUCCESS) {
        snprintf(nvml_why, sizeof nvml_why, "NVML not available (nvmlInit_v2: %s, error %d)",
                 nvml.error_string(r), r);
        dlclose(lib);
        return;
    }
    /* Kept loaded and initialized for the life of the process: the sampler
     * reads it until exit, and NVML cleans up after itself then. */
    nvml_why[0] = '\0';
    nvml_ok = 1;
}

int tb_nvml_available(const char **why)
{
    pthread_once(&nvml_once, nvml_load);
    if (why)
        *why = nvml_why;
    return nvml_ok;
}

static void sample_unknown(tb_nvml_sample *s)
{
    s->available = 0;
    s->sm_clock_mhz = -1;
    s->mem_clock_mhz = -1;
    s->temp_c = -1;
    s->power_mw = -1;
    s->power_limit_mw = -1;
    s->throttle = -1;
}

/* Each query may be unsupported on a given GPU (power on some boards,
 * for one): a failed query leaves its field unknown and the rest stand. */
static void sample_fill(nvml_device dev, tb_nvml_sample *s)
{
    unsigned v;
    unsigned long long reasons;

    s->available = 1;
    if (nvml.clock_info(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
        s->sm_clock_mhz = (int)v;
    if (nvml.clock_info(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
        s->mem_clock_mhz = (int)v;
    if (nvml.temperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
        s->temp_c = (int)v;
    if (nvml.power_usage(dev, &v) == NVML_SUCCESS)
        s->power_mw = (long)v;
    if (nvml.power_limit(dev, &v) == NVML_SUCCESS)
        s->power_limit_mw = (long)v;
    if (nvml.throttle_reasons && nvml.throttle_reasons(dev, &reasons) == NVML_SUCCESS)
        s->throttle = (int64_t)reasons;
}

int tb_nvml_read(unsigned index, tb_nvml_sample *s)
{
    nvml_device dev;

    if (!s)
        return TB_FAIL(TB_ERR_INVALID, "tb_nvml_read: sample pointer is NULL");
    sample_unknown(s);
    if (!tb_nvml_available(NULL))
        return TB_OK;
    if (nvml.handle_by_index(index, &dev) != NVML_SUCCESS)
        return TB_OK;
    sample_fill(dev, s);
    return TB_OK;
}

int tb_nvml_read_pci(const char *pci_bus_id, tb_nvml_sample *s)
{
    nvml_device dev;

    if (!s || !pci_bus_id)
        return TB_FAIL(TB_ERR_INVALID, "tb_nvml_read_pci: NULL argument");
    sample_unknown(s);
    if (!tb_nvml_available(NULL))
        return TB_OK;
    if (nvml.handle_by_pci(pci_bus_id, &dev) != NVML_SUCCESS)
        return TB_OK;
    sample_fill(dev, s);
    return TB_OK;
}

int tb_nvml_driver_version(char *out, size_t cap)
{
    if (!out || cap == 0)
        return TB_FAIL(TB_ERR_INVALID, "tb_nvml_driver_version: no room for the answer");
    out[0] = '\0';
    if (!tb_nvml_available(NULL))
        return TB_OK;
    if (nvml.driver_version(out, (unsigned)cap) != NVML_SUCCESS)
        out[0] = '\0';
    return TB_OK;
}

void tb_nvml_throttle_string(int64_t reasons, char *out, size_t cap)
{
    static const struct { int64_t bit; const char *name; } names[] = {
        {TB_NVML_THROTTLE_GPU_IDLE, "gpu_idle"},
        {TB_NVML_THROTTLE_APP_CLOCKS, "app_clocks"},
        {TB_NVML_THROTTLE_SW_POWER_CAP, "sw_power_cap"},
        {TB_NVML_THROTTLE_HW_SLOWDOWN, "hw_slowdown"},
        {TB_NVML_THROTTLE_SYNC_BOOST, "sync_boost"},
        {TB_NVML_THROTTLE_SW_THERMAL, "sw_thermal"},
        {TB_NVML_THROTTLE_HW_THERMAL, "hw_thermal"},
        {TB_NVML_THROTTLE_HW_POWER_BRAKE, "hw_power_brake"},
        {TB_NVML_THROTTLE_DISPLAY_CLOCKS, "display_clocks"},
    };
    size_t len = 0;

    if (!out || cap == 0)
        return;
    out[0] = '\0';
    if (reasons < 0) {
        snprintf(out, cap, "unknown");
        return;
    }
    if (reasons == 0) {
        snprintf(out, cap, "none");
        return;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0] && len < cap; i++) {
        if (!(reasons & names[i].bit))
            continue;
        int w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", names[i].name);
        len += (w > 0) ? (size_t)w : 0;
    }
    /* Bits NVML added after this list was written are still reported. */
    int64_t known = 0x1FF;
    if ((reasons & ~known) && len < cap)
        snprintf(out + len, cap - len, "%sother(0x%llx)", len ? "," : "",
                 (unsigned long long)(reasons & ~known));
}
