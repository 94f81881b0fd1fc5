"""Writes the GPU core's kernel table (kernel_images.cc) from the PTX and cubins Bazel compiled.

    python3 bazel/embed_kernel_images.py BUILD_PY OUT.cc KERNELS.ptx [ARCH=KERNELS.sm_ARCH.cubin ...]

The table is the one compile_core() embeds (bzna_tf/ops/_build.py's _embed_images, loaded from
BUILD_PY): the cubins in the order given, then the PTX, NUL-terminated, as arch 0.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        raise SystemExit("usage: embed_kernel_images.py BUILD_PY OUT.cc KERNELS.ptx [ARCH=CUBIN ...]")
    spec = importlib.util.spec_from_file_location("bzna_tf_build", argv[1])
    build = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = build  # dataclasses look their module up there
    spec.loader.exec_module(build)
    images = []
    for pair in argv[4:]:
        arch, _, cubin = pair.partition("=")
        images.append((int(arch), Path(cubin).read_bytes()))
    images.append((0, Path(argv[3]).read_bytes() + b"\0"))
    Path(argv[2]).write_text(build._embed_images(images))


if __name__ == "__main__":
    main(sys.argv)
