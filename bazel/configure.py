"""Facts for the Bazel workspace's repository rules (bazel/local_config.bzl), printed as one JSON object.

Run by Bazel with the Python on PATH (or $PYTHON_BIN_PATH), never by hand:

    python3 bazel/configure.py tensorflow BUILD_PY   the installed TensorFlow: tf.sysconfig's headers,
                                                     defines, flags and framework library
    python3 bazel/configure.py cuda BUILD_PY         nvcc, ptxas and nv-codec-headers, found as
                                                     `python -m bzna_tf.ops build --gpu` finds them

BUILD_PY is bzna_tf/ops/_build.py, loaded from its file (it imports nothing but the standard library
at the top, and TensorFlow only inside functions), so that the g++ build and the Bazel build share
one copy of the flags, the CUDA architectures and the tool discovery.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def _load_build(path: str):
    spec = importlib.util.spec_from_file_location("bzna_tf_build", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def tensorflow_facts(build) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    includes, defines, copts = [], [], []
    for flag in tf.sysconfig.get_compile_flags():
        if flag.startswith("-I"):
            includes.append(flag[2:])
        elif flag.startswith("-D"):
            defines.append(flag[2:])
        else:
            copts.append(flag)
    lib_dirs, libs = [], []
    for flag in tf.sysconfig.get_link_flags():
        if flag.startswith("-L"):
            lib_dirs.append(flag[2:])
        elif flag.startswith("-l:"):
            libs.append(flag[3:])
        elif flag.startswith("-l"):
            libs.append(f"lib{flag[2:]}.so")
        else:
            raise SystemExit(f"configure.py: unexpected link flag in tf.sysconfig.get_link_flags(): {flag}")
    found = []
    for name in libs:
        paths = [os.path.join(d, name) for d in lib_dirs if os.path.isfile(os.path.join(d, name))]
        if not paths:
            raise SystemExit(f"configure.py: TensorFlow's {name} is not in {lib_dirs}")
        found.append(paths[0])
    return {
        "version": tf.__version__,
        "python": sys.executable,
        "includes": includes,
        "defines": defines,
        "copts": copts + list(build.EXTRA_FLAGS),
        "linkopts": [build.HIDE_STATIC_RUNTIME],
        "libraries": found,
    }


def cuda_facts(build) -> dict:
    facts = {
        "error": build.gpu_toolchain_error(),
        "python": sys.executable,
        "nvcc_flags": list(build.NVCC_FLAGS),
        "core_flags": list(build.CORE_FLAGS),
        "ptx_arch": build.PTX_ARCH,
    }
    if facts["error"]:
        return facts
    nvcc = build.nvcc()
    ptxas = build.ptxas(nvcc)
    nvcc_release, ptxas_release = build._cuda_release(nvcc), build._cuda_release(ptxas)
    archs = build.ptxas_archs(ptxas)
    if not archs:
        facts["error"] = f"{ptxas} compiles for none of sm_{', sm_'.join(map(str, build.CUBIN_ARCHS))}"
        return facts
    facts.update(
        nvcc=nvcc,
        ptxas=ptxas,
        nvcc_release=".".join(map(str, nvcc_release)),
        ptxas_release=".".join(map(str, ptxas_release)),
        # As compile_core: PTX from a newer nvcc than ptxas is declared at CUDA 12.0's ISA.
        ptx_isa=build.CUDA12_PTX_ISA if ptxas_release < nvcc_release else "",
        archs=archs,
        ffnvcodec=build.ffnvcodec_include(),
    )
    return facts


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[1] not in ("tensorflow", "cuda"):
        raise SystemExit("usage: configure.py tensorflow|cuda PATH/TO/bzna_tf/ops/_build.py")
    build = _load_build(argv[2])
    facts = tensorflow_facts(build) if argv[1] == "tensorflow" else cuda_facts(build)
    print(json.dumps(facts))


if __name__ == "__main__":
    main(sys.argv)
