"""The ``bzna-tf`` command line.

bzna-tf info FILE... [--json]
bzna-tf convert tfrecord|folder|gulp SRC... OUT.bzna [--workers N] [--crf C] [--preset P] ...
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


def _convert(args) -> int:
    from bzna_tf.convert import ConversionError, GulpSource, ImageFolderSource, TFRecordSource, convert

    if args.kind == "tfrecord":
        source = TFRecordSource(
            args.sources,
            image_key=args.image_key,
            label_key=args.label_key or None,
            filename_key=args.filename_key or None,
            label_offset=args.label_offset,
            compression=args.compression,
        )
    elif args.kind == "folder":
        if len(args.sources) != 1:
            raise ValueError(f"Expected one folder. Received: {args.sources}")
        source = ImageFolderSource(args.sources[0])
    else:
        source = GulpSource(args.sources, label_key=args.label_key or None)
    try:
        summary = convert(
            source,
            args.output,
            workers=args.workers,
            crf=args.crf,
            preset=args.preset,
            thumbnails_only=args.thumbnails_only,
            encoder=args.encoder,
            strict=args.strict,
            lenient=args.lenient,
            missing_label=args.missing_label,
            progress=not args.no_progress,
        )
    except ConversionError as e:
        print(f"bzna-tf convert: {e}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _add_convert(sub):
    from bzna_tf.convert.encode import DEFAULT_CRF, DEFAULT_PRESET

    c = sub.add_parser(
        "convert",
        help="convert TFRecords, an image folder or GulpIO chunks to one .bzna file",
        description="Decode every image, encode it as H.265 (libx265, or NVENC) and write one .bzna file. "
        "Output order = input order; undecodable images are reported and skipped; nothing appears "
        "under OUT until the conversion succeeds.",
    )
    c.add_argument("kind", choices=("tfrecord", "folder", "gulp"), help="what the sources are")
    c.add_argument(
        "sources",
        nargs="+",
        help="tfrecord: files or glob patterns (quote them); folder: one folder with a sub-folder per class; "
        "gulp: chunk folders or .gmeta files",
    )
    c.add_argument("output", help="the .bzna file to write")
    c.add_argument("--workers", type=int, default=None, help="encoding processes (default: all cores)")
    c.add_argument(
        "--crf",
        type=float,
        default=DEFAULT_CRF,
        help=f"x265 quality, lower is better (default {DEFAULT_CRF})",
    )
    c.add_argument("--preset", default=DEFAULT_PRESET, help=f"x265 preset (default {DEFAULT_PRESET})")
    c.add_argument("--thumbnails-only", action="store_true", help="store only the <= 512x512 thumbnails")
    c.add_argument("--encoder", choices=("x265", "nvenc"), default="x265", help="nvenc needs an NVIDIA GPU")
    c.add_argument("--strict", action="store_true", help="stop at the first undecodable image")
    c.add_argument("--lenient", action="store_true", help="keep images the decoder had to repair")
    c.add_argument(
        "--missing-label",
        type=int,
        default=None,
        help="target for unlabelled images followed by labelled ones",
    )
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    t = c.add_argument_group("tfrecord and gulp options")
    t.add_argument("--image-key", default="image/encoded", help="tfrecord: the image feature")
    t.add_argument(
        "--label-key",
        default=None,
        help="tfrecord: the label feature (default image/class/label); gulp: the "
        "meta_data key (default label); '' for none",
    )
    t.add_argument("--filename-key", default="image/filename", help="tfrecord: the file name feature")
    t.add_argument(
        "--label-offset",
        type=int,
        default=0,
        help="tfrecord: added to labels; -1 for the classic ImageNet 1..1000",
    )
    t.add_argument(
        "--compression", choices=("GZIP", "ZLIB"), default=None, help="tfrecord: the files' compression"
    )
    c.set_defaults(run=_convert)


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
    _add_convert(sub)
    args = p.parse_args(argv)
    if args.command == "convert" and args.label_key is None:
        args.label_key = "image/class/label" if args.kind == "tfrecord" else "label"
    try:
        return args.run(args)
    except (FileNotFoundError, ValueError) as e:
        print(f"bzna-tf {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
