"""The one configuration step: detects the CUDA toolkit and OpenMPI.

Writes an external repository @local_config with
  //:defs.bzl        HAS_CUDA, CUDA_PATH, HAS_MPI and what was found
  //cuda:BUILD       cc_library targets for cudart, cuBLAS(Lt), cuDNN, NCCL
  //mpi:BUILD        cc_library for OpenMPI (headers live outside /usr/include)
Re-runs when CUDA_PATH changes, so `--repo_env=CUDA_PATH=/nonexistent` gives
the CPU-only build. Binaries never link libcuda or NVML: a machine with no
driver must still start them (NVML is dlopen'ed at run time).
"""

_CUDA_LIBS = ["cudart", "cublas", "cublasLt", "cudnn", "nccl"]

def _find_cuda(ctx):
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    root = ctx.path(path)
    missing = []
    if not root.get_child("bin").get_child("nvcc").exists:
        missing.append("bin/nvcc")
    for h in ["cuda_runtime.h", "cublas_v2.h", "cudnn.h", "nccl.h"]:
        if not root.get_child("include").get_child(h).exists:
            missing.append("include/" + h)
    for lib in _CUDA_LIBS:
        if not root.get_child("lib64").get_child("lib%s.so" % lib).exists:
            missing.append("lib64/lib%s.so" % lib)
    return path, missing

def _cuda_build(path):
    lines = [
        "package(default_visibility = [\"//visibility:public\"])",
        "",
        "cc_library(",
        "    name = \"headers\",",
        "    hdrs = glob([\"include/**\"]),",
        "    includes = [\"include\"],",
        ")",
        "",
        "filegroup(name = \"all_headers\", srcs = glob([\"include/**\"]))",
        "",
    ]
    for lib in _CUDA_LIBS:
        lines += [
            "cc_library(",
            "    name = \"%s\"," % lib,
            "    deps = [\":headers\"],",
            "    linkopts = [\"-L%s/lib64\", \"-Wl,-rpath,%s/lib64\", \"-l%s\"]," % (path, path, lib),
            ")",
            "",
        ]
    return "\n".join(lines)

def _find_mpi(ctx):
    for inc in ["/usr/lib/x86_64-linux-gnu/openmpi/include", "/usr/lib/aarch64-linux-gnu/openmpi/include", "/usr/include/openmpi"]:
        if ctx.path(inc).get_child("mpi.h").exists:
            return inc
    return None

def _impl(ctx):
    cuda_path, missing = _find_cuda(ctx)
    has_cuda = len(missing) == 0
    ctx.file("WORKSPACE", "workspace(name = \"local_config\")\n")
    ctx.file("BUILD", "exports_files([\"defs.bzl\"])\n")

    if has_cuda:
        ctx.symlink(cuda_path + "/include", "cuda/include")
        ctx.file("cuda/BUILD", _cuda_build(cuda_path))
    else:
        # Same labels, empty: CUDA-only targets reference them, and Bazel
        # must resolve a label before target_compatible_with can skip it.
        ctx.file("cuda/BUILD", "\n".join(
            ["package(default_visibility = [\"//visibility:public\"])",
             "filegroup(name = \"all_headers\", srcs = [])"] +
            ["cc_library(name = \"%s\")" % lib for lib in _CUDA_LIBS + ["headers"]],
        ) + "\n")

    mpi_inc = _find_mpi(ctx)
    if mpi_inc:
        ctx.symlink(mpi_inc, "mpi/include")
        ctx.file("mpi/BUILD", "\n".join([
            "package(default_visibility = [\"//visibility:public\"])",
            "cc_library(",
            "    name = \"mpi\",",
            "    hdrs = glob([\"include/**/*.h\"]),",
            "    includes = [\"include\"],",
            "    linkopts = [\"-L%s/lib\", \"-lmpi\"]," % mpi_inc[:-len("/include")],
            ")",
            "",
        ]))
    else:
        ctx.file("mpi/BUILD", "package(default_visibility = [\"//visibility:public\"])\n")

    ctx.file("defs.bzl", "\n".join([
        "\"\"\"Written by tools/local_config.bzl; do not edit.\"\"\"",
        "HAS_CUDA = %s" % has_cuda,
        "CUDA_PATH = %r" % cuda_path,
        "CUDA_MISSING = %r" % missing,
        "HAS_MPI = %s" % (mpi_inc != None),
        "",
    ]))

tunebench_local_config = repository_rule(
    implementation = _impl,
    environ = ["CUDA_PATH"],
    local = True,
)
