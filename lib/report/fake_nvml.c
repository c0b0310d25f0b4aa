/*
 * fake_nvml.c - a stand-in libnvidia-ml.so.1 for telemetry_nvml_test: two
 * GPUs in NVML's (PCI) order, told apart by their readings, so a test can
 * see which one the telemetry sampled. Only the entry points
 * lib/backend/nvml_dl.c binds; NVML's C signatures, return 0 = success.
 *
 *   index 0: PCI 00000000:17:00.0, 40 C, SM 1000 MHz
 *   index 1: PCI 00000000:65:00.0, 71 C, SM 1980 MHz
 *
 * Built as a shared library (lib/report/BUILD); never linked into anything.
 */
#include <stdio.h>
#include <string.h>

typedef struct fake_gpu {
    unsigned bus;
    unsigned temp_c, sm_mhz;
} fake_gpu;

static fake_gpu gpus[2] = {{0x17, 40, 1000}, {0x65, 71, 1980}};

enum { OK = 0, INVALID_ARGUMENT = 2, NOT_FOUND = 6 };

int nvmlInit_v2(void) { return OK; }
int nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(int r) { return r == OK ? "Success" : "fake NVML error"; }

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev)
{
    if (index >= 2)
        return INVALID_ARGUMENT;
    *dev = &gpus[index];
    return OK;
}

/* Accepts NVML's "00000000:65:00.0" and CUDA's "0000:65:00.0" alike. */
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **dev)
{
    unsigned domain, bus, device, function;
    if (!id || sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4)
        return INVALID_ARGUMENT;
    for (int i = 0; i < 2; i++)
        if (domain == 0 && bus == gpus[i].bus && device == 0 && function == 0) {
            *dev = &gpus[i];
            return OK;
        }
    return NOT_FOUND;
}

int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    *mhz = type == 1 /* SM */ ? ((fake_gpu *)dev)->sm_mhz : 2619;
    return OK;
}

int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *c)
{
    (void)sensor;
    *c = ((fake_gpu *)dev)->temp_c;
    return OK;
}

int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    *mw = 100000 + ((fake_gpu *)dev)->temp_c;
    return OK;
}

int nvmlDeviceGetEnforcedPowerLimit(void *dev, unsigned *mw)
{
    (void)dev;
    *mw = 700000;
    return OK;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *dev, unsigned long long *r)
{
    (void)dev;
    *r = 0;
    return OK;
}

int nvmlSystemGetDriverVersion(char *out, unsigned cap)
{
    snprintf(out, cap, "580.00.fake");
    return OK;
}
