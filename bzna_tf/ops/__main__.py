"""``python -m bzna_tf.ops build [--gpu] [--force] [--verbose]``: compile the native ops now.

``--gpu`` also compiles the GPU libraries (needs nvcc, ptxas and
nv-codec-headers, no GPU) and prints their paths: the GPU core, the
TensorFlow warp kernels, the TensorFlow NVDEC kernel. nv-codec-headers that
are not installed are fetched first, without root (Debian's package:
``bzna_tf.ops._build.fetch_ffnvcodec``, the GPU kit's path too).
"""

from __future__ import annotations

import argparse
import sys

from bzna_tf.ops._build import BuildError, build, build_gpu, ffnvcodec_include


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bzna_tf.ops", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the ops for the installed TensorFlow (cached)")
    b.add_argument("--force", action="store_true", help="rebuild even if a cached library exists")
    b.add_argument("--verbose", "-v", action="store_true", help="print the compiler commands")
    b.add_argument("--gpu", action="store_true", help="also build the GPU libraries")
    args = p.parse_args(argv)
    try:
        print(build(force=args.force, verbose=args.verbose))
        if args.gpu:
            ffnvcodec_include(fetch=True)
            libraries = build_gpu(force=args.force, verbose=args.verbose)
            print(libraries.core, libraries.warp, libraries.nvdec, sep="\n")
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
