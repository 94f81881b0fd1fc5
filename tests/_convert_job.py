"""A conversion run as its own process, for tests that kill it (tests/test_convert_resume.py).

    python tests/_convert_job.py SOURCE OUTPUT [--num-shards N] [--workers W] [--kind KIND]

Prints "started <pid>" once the conversion begins, then the summary.
"""

import argparse
import os
import sys

from bzna_tf.convert import SOURCES, EncodeOptions, convert

OPTIONS = {"encoding": EncodeOptions(preset="medium", crf=20, chroma="average")}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("source")
    p.add_argument("output")
    p.add_argument("--num-shards", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--kind", default="folder", choices=tuple(SOURCES))
    args = p.parse_args()
    print(f"started {os.getpid()}", flush=True)
    summary = convert(
        SOURCES[args.kind].from_cli([args.source]),
        args.output,
        num_shards=args.num_shards,
        workers=args.workers,
        progress=False,
        **OPTIONS,
    )
    print(summary, flush=True)
    sys.exit(0)
