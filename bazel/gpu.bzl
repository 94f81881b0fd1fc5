"""The GPU libraries' targets, as bzna_tf/ops/_build.py's build_gpu() builds them.

kernels.cu -> PTX for compute_75 (nvcc) -> one cubin per architecture family (ptxas), embedded
with the PTX in the GPU core (libbzna_tf_gpu_core.so: no TensorFlow, nothing of CUDA linked);
the TensorFlow GPU kernels (libbzna_tf_gpu_warp.so, libbzna_tf_gpu_nvdec.so) link the core by
its soname and find it beside them. The tools and flags come from @local_cuda
(bazel/local_config.bzl), which has them from _build.py.
"""

load(
    "@local_cuda//:defs.bzl",
    "CORE_FLAGS",
    "CUBIN_ARCHS",
    "CUDA_ERROR",
    "NVCC",
    "NVCC_FLAGS",
    "PTXAS",
    "PTX_ARCH",
    "PTX_ISA",
    "PYTHON",
)
load("@local_tensorflow//:defs.bzl", "COPTS", "LINKOPTS")

# Sources include each other as "lib/warp.h", "gpu/core/driver.h", ...: -I of custom_ops/, as the
# g++ build does (-I, not the -isystem of `includes`, so that -Wall covers the headers too).
INCLUDE_SOURCES = ["-Icustom_ops"]

CORE = "libbzna_tf_gpu_core.so"

# The TensorFlow GPU kernels, one library per capability (see _load.py's load_gpu_library).
TF_KERNELS = {
    "libbzna_tf_gpu_warp.so": ["custom_ops/gpu/tf_warp_kernels.cc"],  # BznaWarpYuv420, BznaWarpRgb: CUDA
    "libbzna_tf_gpu_nvdec.so": [  # BznaDecodeWarp, BznaDecodeWarpDataset: NVDEC too
        "custom_ops/gpu/tf_decode_kernels.cc",
        "custom_ops/gpu/tf_decode_dataset_kernels.cc",
    ],
}

def gpu_libraries():
    """Defines the three GPU libraries and :gpu, or, without the toolchain, targets that say so."""
    names = [CORE] + sorted(TF_KERNELS)
    if CUDA_ERROR:
        message = ("bzna_tf: " + CUDA_ERROR).replace("'", "'\\''").replace("$", "$$")
        for name in names:
            native.genrule(
                name = name,
                outs = ["gpu_unavailable/" + name],
                cmd = "echo '%s' >&2; exit 1" % message,
                tags = ["manual"],
            )
        native.filegroup(name = "gpu", srcs = names, tags = ["manual"])
        return
    _kernel_images()
    _core()
    for name, sources in TF_KERNELS.items():
        native.cc_binary(
            name = name,
            srcs = sources + [":" + CORE] + native.glob([
                "custom_ops/gpu/*.h",
                "custom_ops/gpu/core/*.h",
                "custom_ops/kernels/*.h",
                "custom_ops/lib/*.h",
            ]),
            copts = COPTS + INCLUDE_SOURCES,
            linkopts = [
                "-ldl",
                "-Wl,-rpath,$$ORIGIN",  # the core, beside this library
            ] + LINKOPTS,
            linkshared = True,
            deps = [
                "@local_cuda//:ffnvcodec",
                "@local_tensorflow//:tensorflow",
            ],
        )
    native.filegroup(name = "gpu", srcs = names)

def _core_headers():
    return native.glob(["custom_ops/gpu/core/*.h"]) + ["custom_ops/lib/warp.h"]

def _kernel_images():
    """:gpu_kernel_images, the table of the compiled kernels (compile_core()'s kernel_images.cc)."""
    ptx_cmd = " ".join([NVCC] + NVCC_FLAGS + INCLUDE_SOURCES + [
        "--ptx",
        "-arch=compute_%d" % PTX_ARCH,
        "$(location custom_ops/gpu/core/kernels.cu)",
        "-o",
        "$@",
    ])
    if PTX_ISA:
        # PTX from a newer nvcc than ptxas is declared at the ISA that ptxas reads (CUDA12_PTX_ISA).
        ptx_cmd += " && grep -q '^\\.version ' $@ && sed -i '0,/^\\.version /s/^\\.version .*/.version %s/' $@" % PTX_ISA
    native.genrule(
        name = "gpu_kernels_ptx",
        srcs = ["custom_ops/gpu/core/kernels.cu"] + _core_headers(),
        outs = ["gpu_kernels/kernels.ptx"],
        cmd = ptx_cmd,
    )
    for arch in CUBIN_ARCHS:
        native.genrule(
            name = "gpu_kernels_sm_%d" % arch,
            srcs = [":gpu_kernels_ptx"],
            outs = ["gpu_kernels/kernels.sm_%d.cubin" % arch],
            cmd = "%s -arch=sm_%d -O3 --fmad=false $< -o $@" % (PTXAS, arch),  # compile_core()'s options
        )
    native.genrule(
        name = "gpu_kernel_images_cc",
        srcs = [":gpu_kernels_ptx"] + [":gpu_kernels_sm_%d" % arch for arch in CUBIN_ARCHS],
        outs = ["gpu_kernels/kernel_images.cc"],
        cmd = " ".join([
            PYTHON,
            "$(location //bazel:embed_kernel_images.py)",
            "$(location //:bzna_tf/ops/_build.py)",
            "$@",
            "$(location :gpu_kernels_ptx)",
        ] + ["%d=$(location :gpu_kernels_sm_%d)" % (arch, arch) for arch in CUBIN_ARCHS]),
        tools = [
            "//:bzna_tf/ops/_build.py",
            "//bazel:embed_kernel_images.py",
        ],
    )

    # Large initialised arrays: compiled without optimisation, as compile_core() does.
    native.cc_library(
        name = "gpu_kernel_images",
        srcs = [":gpu_kernel_images_cc"],
        hdrs = ["custom_ops/gpu/core/kernel_images.h"],
        copts = ["-O0"] + INCLUDE_SOURCES,
        alwayslink = True,
    )

def _core():
    """The GPU core: NVDEC + the CUDA kernels behind a C ABI; no TensorFlow, no absl."""
    native.cc_binary(
        name = CORE,
        srcs = native.glob(["custom_ops/gpu/core/*.cc"]) + _core_headers(),
        copts = CORE_FLAGS + INCLUDE_SOURCES,
        additional_linker_inputs = ["custom_ops/gpu/core/exports.map"],
        linkopts = [
            "-Wl,-soname," + CORE,
            "-Wl,--version-script=$(location custom_ops/gpu/core/exports.map)",
            "-ldl",
            "-lpthread",
        ],
        linkshared = True,
        deps = [
            ":gpu_kernel_images",
            "@local_cuda//:ffnvcodec",
        ],
    )
