"""The ``bzna-tf`` command line.

bzna-tf info FILE... [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from bzna_tf.format import BznaFile, BznaFormatError, expand_paths

__all__ = ["main", "describe"]


def describe(f: BznaFile) -> dict:
    """The facts ``bzna-tf info --json`` prints for one file."""
    out = {
        "file": f.name,
        "bytes": f.file_size,
        "samples": len(f),
        "tracks": [{"name": t.name, "handler": t.handler, "samples": len(t)} for t in f.tracks.values()],
        "labelled": f.num_labelled,
        "first": None,
    }
    if len(f):
        s = f.sample(0)
        out["first"] = {
            "filename": f.filename(0),
            "target": f.target(0),
            "input_size": list(s.input.size),
            "input_coded_size": list(s.input.coded_size),
            "thumb_size": list(s.thumb.size),
            "thumb_coded_size": list(s.thumb.coded_size),
        }
    return out


def _table(d: dict) -> str:
    lines = [
        f"{d['file']}: {d['bytes']:,} bytes",
        f"  samples   {d['samples']:,} ({d['labelled']:,} labelled, "
        f"{d['samples'] - d['labelled']:,} unlabelled)",
        f"  {'track':<14}{'handler':<9}samples",
    ]
    lines += [f"  {t['name']:<14}{t['handler']:<9}{t['samples']:,}" for t in d["tracks"]]
    fs = d["first"]
    if fs:
        lines.append(
            f"  first     {fs['filename']}  target {fs['target']}  "
            f"input {fs['input_size'][0]}x{fs['input_size'][1]} "
            f"(coded {fs['input_coded_size'][0]}x{fs['input_coded_size'][1]})  "
            f"thumb {fs['thumb_size'][0]}x{fs['thumb_size'][1]} "
            f"(coded {fs['thumb_coded_size'][0]}x{fs['thumb_coded_size'][1]})"
        )
    return "\n".join(lines)


def _info(args) -> int:
    results = []
    status = 0
    for path in expand_paths(args.files):
        try:
            with BznaFile(path) as f:
                results.append(describe(f))
        except (BznaFormatError, OSError) as e:
            print(f"bzna-tf info: {e}", file=sys.stderr)
            status = 1
    if args.json:
        if len(results) == 1 and len(args.files) == 1 and status == 0:
            print(json.dumps(results[0]))
        else:
            print(
                json.dumps(
                    {
                        "files": results,
                        "samples": sum(r["samples"] for r in results),
                        "labelled": sum(r["labelled"] for r in results),
                    }
                )
            )
    else:
        print("\n\n".join(_table(r) for r in results))
        if len(results) > 1:
            print(f"\ntotal: {sum(r['samples'] for r in results):,} samples in {len(results)} files")
    return status


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bzna-tf", description="Benzina (.bzna) datasets for TensorFlow.")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="describe .bzna files")
    info.add_argument("files", nargs="+", help=".bzna files or glob patterns")
    info.add_argument(
        "--json",
        action="store_true",
        help="print JSON: one object for one file, else {'files': [...], totals}",
    )
    info.set_defaults(run=_info)
    args = p.parse_args(argv)
    try:
        return args.run(args)
    except (FileNotFoundError, ValueError) as e:
        print(f"bzna-tf {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
