"""The ``bzna-tf`` command line.

bzna-tf info FILE... [--json]
bzna-tf convert tfrecord|folder|gulp|webdataset|parquet|tfds|hf SRC... OUT.bzna [--workers N] ...
bzna-tf samplelist FILE... -o LIST [--type T] [--ids indices|names] [--split S] | --check LIST [FILE...]
bzna-tf preview FILE... -o GRID.png|GRID.jpg [--n 16] [--warp ...] [--size H W] [--seed S] [--on-error skip]
bzna-tf verify FILE... [--workers N] [--track T] [--no-decode] [--exclusion-list LIST] [--json] [--progress]
bzna-tf service dispatcher [--port P] [--work-dir D] | worker --dispatcher HOST:P [--port Q] [--address A]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from bzna_tf.format import BznaFile, BznaFormatError, expand_paths
from bzna_tf.format.wording import count

__all__ = ["build_parser", "describe", "main"]


def error_text(e: Exception) -> str:
    """One line for an error: an OSError as "PATH: what" (``dd: Is a directory``), others as they say."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        also = f" -> {e.filename2}" if e.filename2 is not None else ""
        return f"{e.filename}{also}: {e.strerror}"
    return str(e)


def describe(f: BznaFile) -> dict:
    """The facts ``bzna-tf info --json`` prints for one file."""
    out = {
        "file": f.name,
        "bytes": f.file_size,
        "samples": len(f),
        "tracks": [{"name": t.name, "handler": t.handler, "samples": len(t)} for t in f.tracks.values()],
        "labelled": f.num_labelled,
        "class_names": f.class_names,
        "conversion": f.metadata.get("conversion"),
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
    names = d.get("class_names")
    if names:
        known = [f"{t} {n}" for t, n in enumerate(names) if n is not None]
        more = f", ... ({len(known) - 10} more)" if len(known) > 10 else ""
        lines.append(f"  classes   {len(known)} named: {', '.join(known[:10])}{more}")
    conv = d.get("conversion")
    if conv:
        # start/stop are positions in the conversion's order: the source's, or a seeded shuffle of it.
        where = "inputs" if conv.get("order", "source") == "source" else "positions"
        of = f" of the order shuffled with seed {conv.get('seed')}" if where == "positions" else ""
        skipped = conv.get("skipped") or []
        lenient = ", decoded leniently (--lenient)" if conv.get("lenient") is True else ""
        lines.append(
            f"  shard     {conv.get('shard')} of {conv.get('num_shards')}: {where} "
            f"[{conv.get('start')}, {conv.get('stop')}){of}, {len(skipped)} skipped{lenient}"
        )
        lines += [f"  left out  {origin}: {reason}" for origin, reason in skipped[:5]]
        if len(skipped) > 5:
            lines.append(f"  left out  ... and {len(skipped) - 5} more (--json lists them all)")
        pictures = conv.get("pictures") or {}
        if any(pictures.values()):
            from bzna_tf.convert.converter import picture_fact_words
            from bzna_tf.convert.images import PICTURE_FACTS

            turned, alpha = conv.get("exif_transpose") is True, conv.get("alpha_background")
            lines += [
                f"  pictures  {picture_fact_words(fact, pictures[fact], turned, alpha)}"
                for fact in PICTURE_FACTS
                if pictures.get(fact)
            ]
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
    for path in expand_paths(args.files, every_file=True):
        try:
            with BznaFile(path) as f:
                results.append(describe(f))
        except (BznaFormatError, OSError) as e:
            print(f"bzna-tf info: {error_text(e)}", file=sys.stderr)
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
            print(f"\ntotal: {count(sum(r['samples'] for r in results), 'sample')} in {len(results)} files")
    return status


def _max_pixels(text: str):
    """``--max-pixels``: a number of pixels, or ``none`` for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of pixels >= 1, or none. Received: {text!r}")
    return value


def _path(text: str) -> str:
    """A path or pattern argument with ``~`` expanded (a quoted ``'~/tfr/*'`` reaches us unexpanded)."""
    return os.path.expanduser(text)


# The flags of `convert` that only some sources take (see SOURCES' cli_options), with their defaults.
_SOURCE_FLAGS = {
    "image_key": None,
    "label_key": None,
    "filename_key": None,
    "label_offset": 0,
    "compression": None,
    "allow_unlabelled": False,
    "allow_outside_paths": False,
    "image_column": None,
    "label_column": None,
    "split": None,
}


def _source(args):
    """The source of ``bzna-tf convert KIND``, refusing flags that KIND does not take."""
    from bzna_tf.convert import SOURCES

    cls = SOURCES[args.kind]
    given = [k for k, default in _SOURCE_FLAGS.items() if getattr(args, k) != default]
    foreign = [k for k in given if k not in cls.cli_options]
    if foreign:
        flags = ", ".join("--" + k.replace("_", "-") for k in foreign)
        takers = {k: [kind for kind, c in SOURCES.items() if k in c.cli_options] for k in foreign}
        which = "; ".join(f"--{k.replace('_', '-')}: {', '.join(v)}" for k, v in takers.items())
        raise ValueError(
            f"{flags} {'does' if len(foreign) == 1 else 'do'} not apply to {args.kind} sources ({which})"
        )
    return cls.from_cli(args.sources, **{k: getattr(args, k) for k in cls.cli_options})


def _encoding(args):
    from bzna_tf.convert import DEFAULT_QUALITY, EncodeOptions
    from bzna_tf.convert.encode import DEFAULT_LAYOUT

    # A deprecated quality's FutureWarning is said as the command's own line, not as Python's
    # warning with a file and a line number.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        options = EncodeOptions(
            quality=args.quality or DEFAULT_QUALITY,
            crf=args.crf,
            preset=args.preset,
            chroma=args.chroma,
            layout=args.layout or DEFAULT_LAYOUT,
            thumbnails_only=args.thumbnails_only,
            encoder=args.encoder,
            lenient=args.lenient,
            exif_transpose=args.exif_transpose,
            alpha_background=args.alpha_background,
            max_pixels=args.max_pixels,
        )
    for w in caught:
        if issubclass(w.category, FutureWarning):
            print(f"bzna-tf convert: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return options


def _convert(args) -> int:
    from bzna_tf.convert import ConversionError, ConversionInterrupted, convert
    from bzna_tf.convert.converter import _check_int as check_int
    from bzna_tf.convert.plan import check_order, shard_paths
    from bzna_tf.convert.sources import read_class_names
    from bzna_tf.format.atomic import make_parent

    # Everything that can be checked is checked before the source is read (a folder of a million images
    # takes minutes to list) and before any image is encoded.
    encoding = _encoding(args)
    check_order(args.order, args.seed)
    for name, low in (("workers", 0), ("num_shards", 1), ("num_workers", 1), ("worker_index", 0)):
        check_int(getattr(args, name), name, low)
    shard_paths(args.output, None)  # a file name, not a folder
    make_parent(args.output)
    class_names = read_class_names(args.class_names) if args.class_names else None
    source = _source(args)
    try:
        summary = convert(
            source,
            args.output,
            encoding=encoding,
            workers=args.workers,
            order=args.order,
            seed=args.seed,
            missing_label=args.missing_label,
            negative_labels=args.negative_labels,
            on_error=args.on_error,
            num_shards=args.num_shards,
            shard_size=None if args.shard_size is None else args.shard_size * 1e6,
            worker_index=args.worker_index,
            num_workers=args.num_workers,
            overwrite=args.overwrite,
            class_names=class_names,
            progress=not args.no_progress,
        )
    except ConversionInterrupted as e:
        print(f"bzna-tf convert: {e}", file=sys.stderr)
        return 130
    except ConversionError as e:
        print(f"bzna-tf convert: {e}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _add_convert(sub):
    from bzna_tf.convert import DEFAULT_MAX_PIXELS, DEFAULT_SEED, ORDERS, SOURCES, X265_PRESETS, encode

    c = sub.add_parser(
        "convert",
        help="convert TFRecords, an image folder, GulpIO chunks, WebDataset shards, Parquet files, a TFDS "
        "folder or a Hugging Face dataset to .bzna (one file or shards)",
        description="Decode every image, encode it as H.265 (libx265, or NVENC) and write one .bzna file or "
        "shards, in a shuffled order (seed recorded) unless --order source. An unreadable record or an "
        "undecodable image stops it, naming the file and record, unless --on-error skip; nothing appears "
        "under a final name until that file is complete; rerunning the same command skips finished files; "
        "Ctrl-C keeps the finished ones.",
    )
    c.add_argument("kind", choices=tuple(SOURCES), help="what the sources are")
    c.add_argument(
        "sources",
        nargs="+",
        type=_path,
        help="; ".join(f"{kind}: {cls.cli_help}" for kind, cls in SOURCES.items()),
    )
    c.add_argument(
        "output",
        type=_path,
        help="the .bzna file to write (its folder is created); with shards, DIR/NAME.bzna gives "
        "NAME-00000-of-0000N.bzna",
    )
    c.add_argument("--workers", type=int, default=None, help="encoding processes (default: all cores)")
    o = c.add_argument_group("order")
    o.add_argument(
        "--order",
        choices=ORDERS,
        default="shuffle",
        help="shuffle (default): the images in a random order drawn from --seed, so that every shard and "
        "every slice holds every class; source: the sources' order (class by class for a folder)",
    )
    o.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"the shuffle's seed, stored in each file's metadata (default {DEFAULT_SEED})",
    )
    q = c.add_argument_group("quality and layout (checked before any work)")
    q.add_argument(
        "--quality",
        choices=tuple(encode.QUALITY_PRESETS) + tuple(encode.DEPRECATED_QUALITIES),
        default=None,
        metavar="{" + ",".join(encode.QUALITY_PRESETS) + "}",
        help=f"named x265 settings (default {encode.DEFAULT_QUALITY}; the Benchmarks page compares them "
        "with JPEG): "
        + "; ".join(
            f"{name}: {v['preset']}, CRF {v['crf']}, {v['chroma']} chroma"
            + (", psycho-visual tuning off" if "psy-rd=0" in v["x265_params"] else "")
            for name, v in encode.QUALITY_PRESETS.items()
        )
        + ". training stores about the RGB PSNR of a JPEG quality-90 copy in half its bytes; quick, "
        "the same for a third of the CPU in bigger files; archival, near-lossless. "
        f"{' and '.join(encode.DEPRECATED_QUALITIES)} (before training) are deprecated",
    )
    q.add_argument(
        "--crf",
        type=float,
        default=None,
        help="x265 constant rate factor in [0, 51], lower is better and bigger (overrides --quality); "
        "NVENC's constant QP",
    )
    q.add_argument(
        "--preset", choices=X265_PRESETS, default=None, metavar="PRESET",
        help=f"x265 preset (overrides --quality): {', '.join(X265_PRESETS)}",
    )  # fmt: skip
    q.add_argument(
        "--chroma",
        choices=encode.CHROMA_MODES,
        default=None,
        help="4:2:0 chroma, average (of each 2x2 block) or lsq (least squares; overrides --quality)",
    )
    q.add_argument(
        "--layout",
        choices=encode.LAYOUTS,
        default=None,
        help=f"coded frames and boxes (default {encode.DEFAULT_LAYOUT}; benzina = the original tools')",
    )
    q.add_argument("--thumbnails-only", action="store_true", help="store only the <= 512x512 thumbnails")
    q.add_argument(
        "--encoder",
        choices=("x265", "nvenc"),
        default="x265",
        help="nvenc needs an NVIDIA GPU and PyNvVideoCodec",
    )
    g = c.add_argument_group(
        "pictures (by default stored as TensorFlow, Keras and torchvision decode them; the summary counts "
        "each case)"
    )
    g.add_argument(
        "--exif-transpose",
        action="store_true",
        help="turn pictures with an EXIF orientation upright (default: stored as decoded, not turned)",
    )
    g.add_argument(
        "--alpha-background",
        metavar="COLOR",
        default=None,
        help="composite pictures with transparent pixels over COLOR: white, black, grey, #RRGGBB or R,G,B "
        "(default: the alpha channel is dropped, the colour under transparent pixels kept)",
    )
    s = c.add_argument_group("shards, resuming and array jobs")
    s.add_argument("--num-shards", type=int, default=None, help="write N shards NAME-0000k-of-0000N.bzna")
    s.add_argument(
        "--shard-size", type=float, default=None, help="or shards of about this many MB (estimated)"
    )
    s.add_argument(
        "--worker-index", type=int, default=None, help="convert only shards I, I+W, ... (with --num-workers)"
    )
    s.add_argument("--num-workers", type=int, default=None, help="W: the processes or hosts sharing the plan")
    s.add_argument(
        "--overwrite", action="store_true", help="replace existing outputs (else finished ones are skipped)"
    )
    b = c.add_argument_group("bad images and labels")
    b.add_argument("--lenient", action="store_true", help="keep images the decoder had to repair")
    b.add_argument(
        "--max-pixels",
        type=_max_pixels,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help=f"a picture of more pixels (width x height) than N is refused from its header, before it is "
        f"decoded (a decompression bomb), as a bad image (see --on-error); none: no limit (default "
        f"{DEFAULT_MAX_PIXELS:,}, Pillow's; a worker takes about 43 bytes per pixel)",
    )
    b.add_argument(
        "--missing-label",
        type=int,
        default=None,
        help="target stored for unlabelled images followed by labelled ones",
    )
    b.add_argument(
        "--negative-labels",
        choices=("error", "unlabelled"),
        default="error",
        help="a negative label (after --label-offset): error (default) names the record; unlabelled stores "
        "the image as unlabelled (TFDS writes -1 for images without a label)",
    )
    b.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a record the source cannot read (a truncated tar member, a sample without an image, a null "
        "image in a row, a label that is not an integer, a file name that is not UTF-8) or an image that "
        "cannot be decoded (HTML saved as .jpg, a truncated JPEG without --lenient, a picture over "
        "--max-pixels): raise (default) stops, naming the file and the key, row "
        "or record; skip leaves it out and counts it in the summary",
    )
    b.add_argument(
        "--class-names",
        type=_path,
        default=None,
        help="a text file of class names, one per line, by target (a folder or GulpIO source needs one per "
        "class)",
    )
    c.add_argument(
        "--no-progress", action="store_true", help="no progress bar (nor lines a minute off a terminal)"
    )
    t = c.add_argument_group("source options (each refused by the sources that do not take it)")
    t.add_argument(
        "--image-key",
        default=None,
        help="tfrecord, tfds: the image feature (default: image/encoded, or TFDS's image, recognised; tfds: "
        "the folder's); "
        "webdataset: the image member's extension (default: the sample's one jpg, png, webp, ... member)",
    )
    t.add_argument(
        "--label-key",
        default=None,
        help="tfrecord, tfds: the label feature (default: image/class/label, or TFDS's label; tfds: the "
        "folder's); gulp: the "
        "meta_data key (default label); webdataset: the label member's extension, or json:FIELD (default: "
        "cls, cls.txt or the json's label field, whichever the first sample has); '' for none",
    )
    t.add_argument(
        "--filename-key",
        default=None,
        help="tfrecord: the file name feature (default: image/filename, or TFDS's file_name); '' for none",
    )
    t.add_argument(
        "--label-offset",
        type=int,
        default=0,
        help="tfrecord: added to labels; -1 for the classic ImageNet 1..1000",
    )
    t.add_argument(
        "--compression", choices=("GZIP", "ZLIB"), default=None, help="tfrecord: the files' compression"
    )
    t.add_argument(
        "--allow-unlabelled",
        action="store_true",
        help="store images whose label is missing as unlabelled images, after the labelled ones (else each "
        "is a bad record, see --on-error): folder: image files beside the class folders; webdataset: a "
        "sample without its label member or json field; tfrecord, tfds: a record without its label feature; "
        "parquet, hf: a null label; gulp: a video without its label key",
    )
    t.add_argument(
        "--allow-outside-paths",
        action="store_true",
        help="parquet, hf: read the files a dataset names outside its own folder (for a trusted dataset): "
        "a row's image path when its bytes are null, and hf's state.json data files. Else only files "
        "inside the folder of the dataset (parquet: of the file naming them) are read, links resolved: "
        "another is refused, or the row is a bad record (see --on-error)",
    )
    t.add_argument(
        "--image-column",
        default=None,
        help="parquet, hf: the column of encoded images, bytes or the datasets Image {bytes, path} struct "
        "(default: recognised; several candidates are refused, listing them)",
    )
    t.add_argument(
        "--label-column",
        default=None,
        help="parquet, hf: the integer label column (default: the datasets ClassLabel column, else the one "
        "integer column); '' for none",
    )
    t.add_argument(
        "--split",
        default=None,
        help="tfds, hf: the split to convert (train, test, ...; a TFDS folder's dataset_info.json, a "
        "DatasetDict folder's dataset_dict.json list them)",
    )
    c.set_defaults(run=_convert)


def _lines(lst) -> str:
    return count(len(lst.entries), "sample line" if lst.type == "SINGLE-SAMPLE" else "file line")


def _samplelist(args) -> int:
    from bzna_tf.datasets import Dataset
    from bzna_tf.format.atomic import make_parent
    from bzna_tf.format.samplelist import SampleList

    if args.check:
        lst = SampleList.read(args.check)
        ds = Dataset(args.files) if args.files else Dataset(lst.data_paths())
        with ds:
            used = ds.sample_list_positions(lst)
            print(
                f"{args.check}: {lst.type}, {_lines(lst)}, "
                f"{count(len(used), 'sample')} used of {len(ds):,} in {count(len(ds.paths), 'data file')}"
            )
        return 0
    if not args.files or not args.output:
        raise ValueError("give the .bzna files and -o LIST (or --check LIST)")
    make_parent(args.output)
    with Dataset(args.files, split=args.split) as ds:
        if args.labelled_only:
            from bzna_tf.format.labels import is_labelled

            ds = ds.select(is_labelled(ds.targets))
        lst = ds.to_sample_list(args.type, ids=args.ids, base=args.base)
        lst.write(args.output, ranges=not args.no_ranges)
    print(f"{args.output}: {lst.type}, {count(len(lst), 'sample')}, {_lines(lst)}, base {lst.base}")
    return 0


def _add_samplelist(sub):
    from bzna_tf.format.samplelist import LIST_TYPES

    c = sub.add_parser(
        "samplelist",
        help="write an LBANN sample list for .bzna files, or check one",
        description="Write a sample list (LBANN's text format, .bzna files in place of HDF5) of every "
        "sample of the files (or of a split), to edit by hand and pass to as_dataset(sample_list=...); "
        "or, with --check, read a list and resolve it against its files.",
    )
    c.add_argument(
        "files",
        nargs="*",
        type=_path,
        help=".bzna files or glob patterns (--check: the data to resolve against)",
    )
    c.add_argument("-o", "--output", type=_path, help="the list file to write (its folder is created)")
    c.add_argument("--type", choices=LIST_TYPES, default="CONDUIT_HDF5_INCLUSION", help="the list type")
    c.add_argument(
        "--ids",
        choices=("indices", "names"),
        default="indices",
        help="sample ids: indices in each file (default) or the stored filenames",
    )
    c.add_argument("--split", default=None, help="only this split, TFDS style ('[:90%%]', 'all[1000:]')")
    c.add_argument("--labelled-only", action="store_true", help="only labelled samples (target >= 0)")
    c.add_argument(
        "--base",
        type=_path,
        default=None,
        help="the base directory on line 3 (default: the files' common one)",
    )
    c.add_argument("--no-ranges", action="store_true", help="write every index, no 'a ... b' ranges")
    c.add_argument(
        "--check", metavar="LIST", type=_path, default=None, help="read LIST and report what it selects"
    )
    c.set_defaults(run=_samplelist)


def _warp(args):
    from bzna_tf.transforms import CenterResizedCrop, RandomResizedCrop, SimilarityTransform

    common = dict(degrees=args.degrees, translate=args.translate, flip_h=args.flip_h, flip_v=args.flip_v)
    if args.warp == "center":
        if any(v for v in common.values()) or args.scale or args.ratio:
            raise ValueError(
                "--warp center takes only --crop (use similarity for flips, rotation, translation)"
            )
        return CenterResizedCrop(args.crop)
    if args.warp == "random-resized-crop":
        return RandomResizedCrop(
            scale=tuple(args.scale or (0.08, 1.0)), ratio=tuple(args.ratio or (3 / 4, 4 / 3)), **common
        )
    return SimilarityTransform(
        scale=tuple(args.scale or (1.0, 1.0)),
        ratio=tuple(args.ratio) if args.ratio else None,
        resize=True,
        **common,
    )


def _preview(args) -> int:
    from bzna_tf.format.atomic import make_parent
    from bzna_tf.previews import PreviewWarning, check_image_path, error_line, preview, write_image

    make_parent(check_image_path(args.output))  # before anything is decoded (or TensorFlow imported)
    import tensorflow as tf

    from bzna_tf.datasets import ClassificationDataset

    size = args.size if len(args.size) == 2 else args.size * 2
    try:
        with (
            ClassificationDataset(args.files, input_label=args.track, split=args.split) as ds,
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always", PreviewWarning)
            p = preview(
                ds,
                args.n,
                shape=tuple(size),
                warp=_warp(args),
                seed=args.seed,
                shuffle=not args.first,
                training=not args.eval,
                columns=args.columns,
                sample_list=args.sample_list,
                antialias=not args.no_antialias,
                on_error=args.on_error,
            )
    except tf.errors.OpError as e:  # a damaged sample: TensorFlow's error names the file and the sample
        print(f"bzna-tf preview: {error_line(e)} (--on-error skip leaves such samples out)", file=sys.stderr)
        return 1
    for w in caught:  # ours as one line each ("asked for 16 samples, but ..."), others as they were
        if issubclass(w.category, PreviewWarning):
            print(f"bzna-tf preview: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    write_image(args.output, p.image)
    print(
        f"{args.output}: {p.image.shape[1]}x{p.image.shape[0]}, {count(len(p.indices), 'sample')} "
        f"({', '.join(str(i) for i in p.indices[:8])}{' ...' if len(p.indices) > 8 else ''})"
    )
    return 0


def _add_preview(sub):
    c = sub.add_parser(
        "preview",
        help="a PNG or JPEG grid of decoded, augmented samples with their labels",
        description="Decode and warp samples exactly as as_dataset(seed=SEED, ...) would and write them as "
        "one image grid (PNG or JPEG, by the output's suffix); each tile is captioned '<sample index>: "
        "<label>' ('-': no label).",
    )
    c.add_argument("files", nargs="+", type=_path, help=".bzna files or glob patterns")
    c.add_argument(
        "-o",
        "--output",
        required=True,
        type=_path,
        help="the image to write: .png, or .jpg/.jpeg for JPEG (quality 95); its folder is created",
    )
    c.add_argument("--n", type=int, default=16, help="how many samples (default 16)")
    c.add_argument(
        "--size", type=int, nargs="+", default=[128], metavar="H [W]", help="tile size (default 128)"
    )
    c.add_argument(
        "--warp",
        choices=("random-resized-crop", "center", "similarity"),
        default="random-resized-crop",
        help="the augmentation (default random-resized-crop)",
    )
    c.add_argument("--scale", type=float, nargs=2, metavar=("LO", "HI"), help="area fraction range")
    c.add_argument("--ratio", type=float, nargs=2, metavar=("LO", "HI"), help="aspect ratio (w/h) range")
    c.add_argument("--crop", type=float, default=1.0, help="center: the crop's side fraction (default 1)")
    c.add_argument("--degrees", type=float, default=0.0, help="random rotation range, +-degrees")
    c.add_argument("--translate", type=float, default=0.0, help="random translation, fraction of the output")
    c.add_argument("--flip-h", type=float, default=0.0, help="horizontal flip probability")
    c.add_argument("--flip-v", type=float, default=0.0, help="vertical flip probability")
    c.add_argument("--seed", type=int, default=0, help="picks the samples and their warps (default 0)")
    c.add_argument("--first", action="store_true", help="the first N samples instead of N at random")
    c.add_argument("--eval", action="store_true", help="the warp's deterministic (training=False) values")
    c.add_argument("--columns", type=int, default=None, help="tiles per row (default: a square grid)")
    c.add_argument(
        "--track", choices=("bzna_thumb", "bzna_input"), default="bzna_thumb", help="picture track"
    )
    c.add_argument("--split", default=None, help="only this split, TFDS style")
    c.add_argument(
        "--sample-list", type=_path, default=None, help="only the samples of this LBANN sample list"
    )
    c.add_argument(
        "--no-antialias", action="store_true", help="sample points where the warp shrinks (Benzina's warp)"
    )
    c.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a sample that cannot be read or decoded: raise (default) stops with one line naming it; skip "
        "leaves it out, shows another sample in its place and names it",
    )
    c.set_defaults(run=_preview)


def _verify(args) -> int:
    from bzna_tf.format.atomic import make_parent
    from bzna_tf.verify import format_report, verify

    tracks = ("bzna_thumb", "bzna_input") if args.track == "both" else (args.track,)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    if args.exclusion_list:
        make_parent(args.exclusion_list)  # before the run, not after it
    report = verify(
        args.files, workers=args.workers, tracks=tracks, decode=not args.no_decode, progress=progress
    )
    if args.json:
        out = report.to_json()
        if args.exclusion_list:
            out["exclusion_list"] = args.exclusion_list
    else:  # the report comes first: a list that cannot be written must not hide it
        print(format_report(report), flush=True)
    if args.exclusion_list:
        lst = report.exclusion_list()
        lst.write(args.exclusion_list)
    if args.json:
        print(json.dumps(out))
    elif args.exclusion_list:
        print(
            f"{args.exclusion_list}: {lst.type}, leaves out {count(report.damaged, 'damaged sample')}, "
            f"uses {lst.num_included:,}"
        )
    return 0 if report.ok else 1


def _add_verify(sub):
    c = sub.add_parser(
        "verify",
        help="check every checksum and decode every picture; list the damaged samples",
        description="Check each picture against the checksum stored when the file was written, and the "
        "outer index against its own, then decode it with the source op's decoder (FFmpeg). Files without "
        "checksums (the original tools') are verified by decoding only, which finds only part of the damage. "
        "Exits 1 when anything is damaged.",
    )
    c.add_argument("files", nargs="+", type=_path, help=".bzna files, glob patterns or directories")
    c.add_argument("--workers", type=int, default=None, help="threads (default: all cores)")
    c.add_argument(
        "--track",
        choices=("both", "bzna_thumb", "bzna_input"),
        default="both",
        help="the pictures to verify (default both)",
    )
    c.add_argument("--no-decode", action="store_true", help="checksums only (much quicker)")
    c.add_argument(
        "--exclusion-list",
        metavar="LIST",
        type=_path,
        default=None,
        help="write a CONDUIT_HDF5_EXCLUSION sample list leaving out the damaged samples (its folder is "
        "created before the run)",
    )
    c.add_argument(
        "--json", action="store_true", help="print JSON: one object for one file, else {'files': [...]}"
    )
    c.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    c.set_defaults(run=_verify)


def _service(args) -> int:
    from bzna_tf import service

    if args.role == "dispatcher":
        server = service.dispatcher(
            args.port, work_dir=args.work_dir, fault_tolerant_mode=args.fault_tolerant
        )
        print(f"bzna-tf service: dispatcher at {server.target}", flush=True)
    else:
        server = service.worker(args.dispatcher, args.port, worker_address=args.address)
        print(
            f"bzna-tf service: worker for {args.dispatcher}, port {args.port or 'chosen by TensorFlow'}",
            flush=True,
        )
    server.join()  # until the process is killed
    return 0


def _add_service(sub):
    c = sub.add_parser(
        "service",
        help="run a tf.data service dispatcher or worker that knows bzna_tf's ops",
        description="Start a tf.data service server with bzna_tf's ops loaded (the dispatcher needs them to "
        "split BznaDataset for distributed_epoch, workers to run the pipeline). Runs until killed.",
    )
    roles = c.add_subparsers(dest="role", required=True)
    d = roles.add_parser("dispatcher", help="the dispatcher")
    d.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one, printed)")
    d.add_argument("--work-dir", default=None, help="journal folder (for --fault-tolerant)")
    d.add_argument("--fault-tolerant", action="store_true", help="journal state so a restart resumes jobs")
    w = roles.add_parser("worker", help="a worker")
    w.add_argument("--dispatcher", required=True, help="the dispatcher's HOST:PORT")
    w.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    w.add_argument(
        "--address",
        default=None,
        help="HOST:PORT the dispatcher and clients reach this worker at (default localhost:%%port%%)",
    )
    c.set_defaults(run=_service)


def build_parser() -> argparse.ArgumentParser:
    """The ``bzna-tf`` argument parser, with every subcommand (the docs' CLI reference is made from it)."""
    p = argparse.ArgumentParser(prog="bzna-tf", description="Benzina (.bzna) datasets for TensorFlow.")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="describe .bzna files")
    info.add_argument("files", nargs="+", type=_path, help=".bzna files or glob patterns")
    info.add_argument(
        "--json",
        action="store_true",
        help="print JSON: one object for one file, else {'files': [...], totals}",
    )
    info.set_defaults(run=_info)
    _add_convert(sub)
    _add_samplelist(sub)
    _add_preview(sub)
    _add_verify(sub)
    _add_service(sub)
    return p


def main(argv=None) -> int:
    """Runs ``bzna-tf`` with ``argv`` (default: the process's arguments); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (OSError, ValueError) as e:  # BznaFormatError and SampleListError are ValueErrors
        print(f"bzna-tf {args.command}: {error_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C outside a conversion (which says more): one line, the shell's 130
        print(f"bzna-tf {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
