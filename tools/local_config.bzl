"""The one configuration step: detects the CUDA toolkit and OpenMPI.

Writes an external repository @local_config with
  //:defs.bzl        HAS_CUDA, CUDA_PATH, HAS_MPI and what was found
  //cuda:BUILD       cc_library targets for cudart, cuBLAS(Lt), cuDNN, NCCL
  //mpi:BUILD        cc_library for OpenMPI (headers live outside /usr/include)
Where the toolkit is: CUDA_PATH, else /usr/local/cuda, else
~/.cache/tunebench/cuda (where tools/setup.sh installs one from NVIDIA's wheels).
TB_NVCC, when set, is the nvcc that compiles the .cu files, from another
toolkit than CUDA_PATH's (a CUDA 12 kit from the wheels has no nvcc; .ci/run
builds against one with CUDA 13's nvcc); .cu files then see that nvcc's own
headers, while C code and the link see CUDA_PATH's.
Re-runs when CUDA_PATH or TB_NVCC changes, so `--repo_env=CUDA_PATH=/nonexistent`
gives the CPU-only build. Binaries never link libcuda or NVML: a machine with no
driver must still start them (NVML is dlopen'ed at run time).
"""

_CUDA_LIBS = ["cudart", "cublas", "cublasLt", "cudnn", "nccl"]

def _cuda_path(ctx):
    if "CUDA_PATH" in ctx.os.environ:
        return ctx.os.environ["CUDA_PATH"]
    home = ctx.os.environ.get("HOME", "")
    for p in ["/usr/local/cuda"] + ([home + "/.cache/tunebench/cuda"] if home else []):
        if ctx.path(p).get_child("include").get_child("cuda_runtime.h").exists:
            return p
    return "/usr/local/cuda"

def _find_cuda(ctx):
    path = _cuda_path(ctx)
    root = ctx.path(path)
    nvcc = ctx.os.environ.get("TB_NVCC", path + "/bin/nvcc")
    missing = []
    if not ctx.path(nvcc).exists:
        missing.append(nvcc if "TB_NVCC" in ctx.os.environ else "bin/nvcc")
    for h in ["cuda_runtime.h", "cublas_v2.h", "cudnn.h", "nccl.h"]:
        if not root.get_child("include").get_child(h).exists:
            missing.append("include/" + h)
    for lib in _CUDA_LIBS:
        if not root.get_child("lib64").get_child("lib%s.so" % lib).exists:
            missing.append("lib64/lib%s.so" % lib)
    return path, nvcc, missing

def _cudart_version(ctx, path):
    """CUDART_VERSION of the toolkit's headers as "MAJOR.MINOR", or "" ."""
    h = ctx.path(path + "/include/cuda_runtime_api.h")
    if not h.exists:
        return ""
    for line in ctx.read(h).splitlines():
        f = [w for w in line.replace("\t", " ").split(" ") if w]
        if len(f) == 3 and f[0] == "#define" and f[1] == "CUDART_VERSION" and f[2].isdigit():
            v = int(f[2])
            return "%d.%d" % (v // 1000, (v % 1000) // 10)
    return ""

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
    cuda_path, nvcc, missing = _find_cuda(ctx)
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
        "NVCC = %r" % nvcc,
        "CUDA_VERSION = %r" % (_cudart_version(ctx, cuda_path) if has_cuda else ""),
        "CUDA_MISSING = %r" % missing,
        "HAS_MPI = %s" % (mpi_inc != None),
        "",
    ]))

tunebench_local_config = repository_rule(
    implementation = _impl,
    environ = ["CUDA_PATH", "TB_NVCC", "HOME"],
    local = True,
)
