"""Compiles .cu files with nvcc and gates CUDA-only targets.

cuda_objects(name, srcs, hdrs): one nvcc -c per .cu for sm_80 and sm_90 plus
PTX (compute_90), position-independent, so a cc_library can take the objects.
nvcc's resource report (-Xptxas -v) is kept beside each object, and a kernel
that spills registers to local memory fails the build (tools/nvcc_wrap.sh).

CUDA_ONLY: a target_compatible_with value that skips a target under //...
when the toolkit was not found (Bazel 4.2's @platforms has no `incompatible`).

cuda_test(name, ...): a small cc_test that is CUDA_ONLY.

if_cuda(with_cuda, without): one of two lists, chosen by the configuration
step (no select(), no #ifdef): the CUDA file or target, or its stand-in.
"""

load("@local_config//:defs.bzl", "HAS_CUDA", "NVCC")

CUDA_ONLY = [] if HAS_CUDA else ["//tools:cuda_not_found"]

def if_cuda(with_cuda, without = []):
    """with_cuda where the toolkit was found, else without (both lists)."""
    return with_cuda if HAS_CUDA else without

_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _cuda_objects_impl(ctx):
    outs = []
    reports = []
    hdr_files = depset(transitive = [h.files for h in ctx.attr.hdrs])
    for src in ctx.files.srcs:
        stem = src.basename[:-len(".cu")]
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.pic.o" % (ctx.label.name, stem))
        rep = ctx.actions.declare_file("_cuda_objs/%s/%s.ptxas.txt" % (ctx.label.name, stem))
        args = ctx.actions.args()
        args.add(NVCC)
        args.add(obj.path)
        args.add(rep.path)
        args.add(src.path)
        args.add_all(ctx.attr.allow_spill, before_each = "--allow-spill")
        args.add("--")
        args.add_all(_ARCH_FLAGS)
        args.add_all(["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-lineinfo"])
        args.add("-I.")
        args.add("-I" + ctx.bin_dir.path)
        ctx.actions.run(
            executable = ctx.executable._wrap,
            arguments = [args],
            inputs = depset([src], transitive = [hdr_files, ctx.attr._cuda_headers.files]),
            outputs = [obj, rep],
            use_default_shell_env = True,
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
        )
        outs.append(obj)
        reports.append(rep)
    return [
        DefaultInfo(files = depset(outs)),
        OutputGroupInfo(ptxas_reports = depset(reports)),
    ]

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "allow_spill": attr.string_list(doc = "kernel name substrings allowed to spill (cold kernels only)"),
        "_wrap": attr.label(default = "//tools:nvcc_wrap", executable = True, cfg = "exec"),
        "_cuda_headers": attr.label(default = "@local_config//cuda:all_headers"),
    },
)

# What every .cu file includes, whatever its op family.
_KERNEL_HDRS = [
    "//lib/backend/cuda:check.h",
    "//lib/core:status.h",
]

def cuda_library(name, srcs, hdrs, cu_hdrs = [], deps = [], allow_spill = []):
    """The .cu files of one op family as a CUDA-only cc_library.

    srcs: the .cu files, compiled by cuda_objects into `<name>_objs`.
    hdrs: the launchers' public headers (the cc_library's hdrs; nvcc sees them too).
    cu_hdrs: what else the .cu files include (shared math headers, launch.cuh,
      //lib headers); nvcc only. Every kernel reports through status.h and
      checks its launches with lib/backend/cuda/check.h: those two are always
      added.
    deps: the cc_library's deps; cudart and //lib/core:status are always added.
    The library is alwayslink and linkstatic, as object files from a rule need.
    """
    cuda_objects(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs + cu_hdrs + _KERNEL_HDRS,
        allow_spill = allow_spill,
        target_compatible_with = CUDA_ONLY,
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        alwayslink = 1,
        linkstatic = 1,
        target_compatible_with = CUDA_ONLY,
        deps = deps + ["//lib/core:status", "@local_config//cuda:cudart"],
    )

def cuda_test(name, **kwargs):
    """A small cc_test of CUDA-only code, skipped where the toolkit was not found.

    Every other argument goes to cc_test as it is.
    """
    native.cc_test(
        name = name,
        size = "small",
        target_compatible_with = CUDA_ONLY,
        **kwargs
    )
