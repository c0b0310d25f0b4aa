/*
 * nvml_dl.h - GPU clocks, temperature, power and throttle reasons from NVML,
 * loaded with dlopen("libnvidia-ml.so.1") at run time.
 *
 * Why dlopen: NVML ships with the driver, not the toolkit. A binary linked
 * against it does not start on a machine without a driver, and tunebench
 * must start everywhere (it falls back to the CPU). So nothing links NVML;
 * when the library is missing every reading is "unknown" and callers say
 * "NVML not available" instead of failing.
 *
 * Users: the environment fingerprint (clocks and driver at the start of a
 * run) and the telemetry sampler (clocks, temperature, power, throttling
 * during a run, to tell a slow result from a throttled GPU).
 *
 * NVML's device order is PCI order; CUDA's is fastest-first unless
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, and CUDA_VISIBLE_DEVICES renumbers. Read
 * by PCI bus id (cudaDeviceGetPCIBusId) to be sure of the device.
 *
 * No CUDA header is needed: this file builds in the CPU-only build too.
 * Test: lib/backend/cuda/probe_test.c (this machine has no NVML).
 */
#ifndef TB_NVML_DL_H
#define TB_NVML_DL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One reading. Every field is -1 when NVML cannot say (not loaded, device
 * not found, or the query is unsupported on this GPU). */
typedef struct tb_nvml_sample {
    int available;            /* 1 when NVML answered for this device */
    int sm_clock_mhz;         /* current SM clock */
    int mem_clock_mhz;        /* current memory clock */
    int temp_c;               /* GPU core temperature */
    long power_mw;            /* current board power draw, milliwatts */
    long power_limit_mw;      /* enforced power limit, milliwatts */
    int64_t throttle;         /* TB_NVML_THROTTLE_* bits, -1 unknown */
} tb_nvml_sample;

/* Throttle (NVML "clocks event") reason bits, NVML's documented values. */
#define TB_NVML_THROTTLE_GPU_IDLE             0x0000000000000001LL
#define TB_NVML_THROTTLE_APP_CLOCKS           0x0000000000000002LL
#define TB_NVML_THROTTLE_SW_POWER_CAP         0x0000000000000004LL
#define TB_NVML_THROTTLE_HW_SLOWDOWN          0x0000000000000008LL
#define TB_NVML_THROTTLE_SYNC_BOOST           0x0000000000000010LL
#define TB_NVML_THROTTLE_SW_THERMAL           0x0000000000000020LL
#define TB_NVML_THROTTLE_HW_THERMAL           0x0000000000000040LL
#define TB_NVML_THROTTLE_HW_POWER_BRAKE       0x0000000000000080LL
#define TB_NVML_THROTTLE_DISPLAY_CLOCKS       0x0000000000000100LL

/* Loads and initializes NVML once (thread-safe). Returns 1 when usable;
 * 0 otherwise with *why (if why != NULL) set to a static reason starting
 * "NVML not available". Never fails. */
int tb_nvml_available(const char **why);

/* Fills *s for NVML device `index` (NVML/PCI order). Returns TB_OK, also
 * when NVML or the device is missing (then s->available = 0 and every field
 * is -1); TB_ERR_INVALID only when s is NULL. */
int tb_nvml_read(unsigned index, tb_nvml_sample *s);

/* Same, for the device with this PCI bus id ("0000:3B:00.0", as
 * cudaDeviceGetPCIBusId writes it). */
int tb_nvml_read_pci(const char *pci_bus_id, tb_nvml_sample *s);

/* Writes the driver version ("580.65.06") into out; "" when unknown.
 * Returns TB_OK; TB_ERR_INVALID when out is NULL or cap is 0. */
int tb_nvml_driver_version(char *out, size_t cap);

/* Writes the names of the set bits ("sw_power_cap,hw_thermal"), "none"
 * for 0 or "unknown" for -1, truncated to cap. */
void tb_nvml_throttle_string(int64_t reasons, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
