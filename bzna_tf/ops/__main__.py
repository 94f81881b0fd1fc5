"""``python -m bzna_tf.ops build [--force] [--verbose]``: compile the native ops now."""

from __future__ import annotations

import argparse
import sys

from bzna_tf.ops._build import BuildError, build


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bzna_tf.ops", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the ops for the installed TensorFlow (cached)")
    b.add_argument("--force", action="store_true", help="rebuild even if a cached library exists")
    b.add_argument("--verbose", "-v", action="store_true", help="print the compiler commands")
    args = p.parse_args(argv)
    try:
        path = build(force=args.force, verbose=args.verbose)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
