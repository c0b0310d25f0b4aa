/*
 * host_device.h - what every kernels/ *_math.h header needs to be compiled
 * both as C on the host (the CPU backend, the references) and as CUDA on
 * the device, from one source:
 *   TB_HD            the qualifier of a per-element function: static inline
 *                    in C, __host__ __device__ inline under nvcc
 *   TB_MUL, TB_ADD   a multiply and an add that nvcc may not fuse into an
 *                    FMA (__fmul_rn, __fadd_rn on the device). On the host,
 *                    compile code that includes a header using them with
 *                    -ffp-contract=off (GCC's default in gnu11 mode is to
 *                    fuse on FMA targets; lib/backend/cpu/BUILD's
 *                    GELU_COPTS and CPU_OPS_COPTS), so both sides round
 *                    op by op and agree bitwise.
 */
#ifndef TB_KERNELS_HOST_DEVICE_H
#define TB_KERNELS_HOST_DEVICE_H

#ifdef __CUDACC__
#define TB_HD __host__ __device__ inline
#else
#define TB_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define TB_MUL(a, b) __fmul_rn((a), (b))
#define TB_ADD(a, b) __fadd_rn((a), (b))
#else
#define TB_MUL(a, b) ((a) * (b))
#define TB_ADD(a, b) ((a) + (b))
#endif

#endif
