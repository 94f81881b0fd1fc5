"""The ``bzna-tf`` command line (``bzna-tf --help``, ``bzna-tf COMMAND --help``: options and examples).

bzna-tf info FILE... [--json]
bzna-tf convert tfrecord|folder|gulp|webdataset|parquet|tfds|hf SRC... OUT.bzna [-j N] [--progress MODE] ...
bzna-tf samplelist FILE... -o LIST [--type T] [--ids indices|names] [--split S] | --check LIST [FILE...]
bzna-tf preview FILE... -o GRID.png|GRID.jpg [--n 16] [--warp ...] [--size H [W]] [--seed S] [--on-error skip]
bzna-tf verify FILE... [-j N] [--track T] [--no-decode] [--exclusion-list LIST] [--json] [--progress MODE]
bzna-tf service dispatcher [--port P] [--work-dir D] | worker --dispatcher HOST:P [--port Q] [--address A]
bzna-tf --version"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time
import warnings

from bzna_tf.format import BznaFile, BznaFormatError, expand_paths
from bzna_tf.format.wording import count

__all__ = ["build_parser", "describe", "example_commands", "main"]


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
        s = f.sample(0, verify=False)  # the index is described; a damaged picture is verify's to find
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


def _no_files(args, e) -> int:
    """``info`` and ``verify`` that found no file to read: with ``--json``, the error on stderr and the
    ``{"file", "error"}`` object the reference promises on stdout (exit status 1); else ``e`` raised."""
    if not args.json:
        raise e
    print(f"bzna-tf {args.command}: {error_text(e)}", file=sys.stderr)
    print(json.dumps({"file": " ".join(map(str, args.files)), "error": error_text(e)}))
    return 1


def _info(args) -> int:
    results, errors = [], []
    status = 0
    try:
        paths = expand_paths(args.files, every_file=True)
    except (ValueError, OSError) as e:
        return _no_files(args, e)
    for path in paths:
        try:
            with BznaFile(path) as f:
                results.append(describe(f))
        except (BznaFormatError, OSError) as e:
            print(f"bzna-tf info: {error_text(e)}", file=sys.stderr)
            errors.append({"file": str(path), "error": error_text(e)})
            status = 1
    if args.json:
        # One file named as such: its object. A pattern or a folder: the list, however many match.
        one = len(args.files) == 1 and not glob.has_magic(args.files[0]) and not os.path.isdir(args.files[0])
        if one and len(results) + len(errors) == 1:
            print(json.dumps(results[0] if results else errors[0]))
        else:
            print(
                json.dumps(
                    {
                        "files": results,
                        "samples": sum(r["samples"] for r in results),
                        "labelled": sum(r["labelled"] for r in results),
                        "errors": errors,
                    }
                )
            )
    else:
        print("\n\n".join(_table(r) for r in results))
        if len(results) > 1:
            print(f"\ntotal: {count(sum(r['samples'] for r in results), 'sample')} in {len(results)} files")
    return status


_WIDTH = 100  # an example command longer than this is cut into lines ending in " \"


def _examples(*lines: str) -> str:
    """An "examples:" epilog: each command (a line starting ``bzna-tf``) after its comment, if any.

    A command longer than the help's width is cut into lines ending in `` \\`` before an option, so that
    each option stays beside its value.
    """
    out = ["examples:"]
    for line in lines:
        if not line.startswith("bzna-tf "):
            out += ["", f"  # {line}"] if len(out) > 1 else [f"  # {line}"]
            continue
        chunks = []  # each option with the words after it (its value)
        for word in line.split(" "):
            if (word.startswith("-") and not word[1:2].isdigit()) or not chunks:
                chunks.append(word)
            else:
                chunks[-1] += " " + word
        row = "  " + chunks[0]
        for chunk in chunks[1:]:
            if len(row) + 1 + len(chunk) > _WIDTH - 2:
                out.append(row + " \\")
                row = "      " + chunk
            else:
                row += " " + chunk
        out.append(row)
    return "\n".join(out) + "\n"


def example_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The commands of ``parser``'s "examples:" epilog, each on one line (for the tests and the docs)."""
    text = (parser.epilog or "").replace("\\\n", " ")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip().startswith("bzna-tf ")]


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, but an "examples:" epilog keeps its lines, and ``--size`` reads ``H [W]``."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _format_args(self, action, default_metavar):
        if isinstance(action, _HeightWidth):
            return "H [W]"
        return super()._format_args(action, default_metavar)


class _UsageError(ValueError):
    """A command line that parses but cannot run as given (an argument missing, flags that contradict):
    :func:`main` prints the command's usage and the message, and exits with status 2, as argparse does."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser with :class:`_HelpFormatter` (its subcommands' parsers are of its class)."""

    def __init__(self, *args, formatter_class=_HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


class _HeightWidth(argparse.Action):
    """``--size H [W]``: one or two integers (a square, or height and width)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if len(values) > 2:
            parser.error(
                f"argument {option_string}: expected H or H W. Received: {' '.join(map(str, values))}"
            )
        setattr(namespace, self.dest, list(values) if len(values) == 2 else [values[0], values[0]])


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


def _byte_count(text: str) -> int:
    """``--max-image-bytes``: a number of bytes, or with a binary unit: ``512M``, ``1G``, ``1GiB``."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:([KMGT])(?:i?B)?)?\s*", text, re.IGNORECASE)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"expected a number of bytes such as 268435456, 512M or 1G: {text!r}"
        )
    return int(m.group(1)) << (10 * ("KMGT".index(m.group(2).upper()) + 1) if m.group(2) else 0)


def _option(*flags, **kwargs):
    """One row of an options table: ``add_argument``'s arguments."""
    return flags, kwargs


def _dest(flags) -> str:
    return flags[-1].lstrip("-").replace("-", "_")


def _add_options(parser, table) -> None:
    """Adds a table's options to ``parser``: ``{group title (None: the parser's own): [rows]}``."""
    for title, rows in table.items():
        group = parser if title is None else parser.add_argument_group(title)
        for flags, kwargs in rows:
            group.add_argument(*flags, **kwargs)


class _Renamed(argparse.Action):
    """A flag's old name, kept for one release: hidden from the help, it warns and sets the new flag."""

    def __init__(self, option_strings, dest, new, **kwargs):
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"{parser.prog}: warning: {option_string} is renamed {self.new}; the old name will be removed in "
            "the next release",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def _renamed(old, new, dest, **kwargs):
    """The row of a renamed flag's old name (``type``, ``nargs``... as the new one's)."""
    return _option(old, action=_Renamed, new=new, dest=dest, **kwargs)


def _progress_options(what: str):
    """``--progress [MODE]`` and ``--no-progress``, the same for every long command."""
    from bzna_tf.format.progress import PROGRESS_MODES

    return [
        _option(
            "--progress", nargs="?", choices=PROGRESS_MODES, const="bar", default="auto", metavar="MODE",
            help=f"{what} on stderr: auto (default): a bar redrawn in place on a terminal, else plain lines "
            "(at least one a minute, and one at each further 10%% once 5 s have passed since the last, for "
            "a log or a batch job's output; a run of a few seconds prints none); bar or lines "
            "either way; none: nothing. --progress alone: bar",
        ),
        _option("--no-progress", dest="progress", action="store_const", const="none",
                help="the same as --progress none"),
    ]  # fmt: skip


_CONVERT_SOURCE_OPTIONS = "source options (each refused by the sources that do not take it)"


def _convert_options() -> dict:
    """The options of ``bzna-tf convert`` by group; the encoding ones default to EncodeOptions' fields."""
    from bzna_tf.convert import DEFAULT_SEED, ORDERS, X265_PRESETS, EncodeOptions, encode
    from bzna_tf.convert.converter import ENCODERS

    e = EncodeOptions  # the dataclass's defaults: EncodeOptions.quality is the default quality
    qualities = "; ".join(
        f"{name}: {v['preset']}, CRF {v['crf']}, {v['chroma']} chroma"
        + (", psycho-visual tuning off" if "psy-rd=0" in v["x265_params"] else "")
        for name, v in encode.QUALITY_PRESETS.items()
    )
    return {
        None: [
            _option("-j", "--processes", type=int, default=None, metavar="N",
                    help="encoding processes (default: all usable cores; 0: encode in this process)"),
            _renamed("--workers", "--processes (-j)", "processes", type=int, metavar="N"),
            *_progress_options("the progress"),
        ],
        "order": [
            _option("--order", choices=ORDERS, default="shuffle",
                    help="shuffle (default): the images in a random order drawn from --seed, so that every "
                    "shard and every slice is a random sample of the whole (not stratified: a small one can "
                    "miss a class); source: the sources' order (class by class for a folder)"),
            _option("--seed", type=int, default=None,
                    help=f"the shuffle's seed, stored in each file's metadata (default {DEFAULT_SEED}; "
                    "refused with --order source, which does not shuffle)"),
        ],
        "quality and layout (checked before any work)": [
            _option("--quality", choices=tuple(encode.QUALITY_PRESETS) + tuple(encode.DEPRECATED_QUALITIES),
                    default=e.quality, metavar="{" + ",".join(encode.QUALITY_PRESETS) + "}",
                    help=f"named x265 settings (default {e.quality}; the Benchmarks page compares them with "
                    f"JPEG): {qualities}. training stores at least the RGB PSNR of a JPEG quality-90 copy "
                    "in about 0.55x its bytes; quick, the same for a third of the CPU in bigger files; "
                    "archival, near-lossless. "
                    f"{' and '.join(encode.DEPRECATED_QUALITIES)} (before training) are deprecated"),
            _option("--crf", type=float, default=e.crf,
                    help="x265 constant rate factor in [0, 51], lower is better and bigger (overrides "
                    "--quality); NVENC's constant QP"),
            _option("--preset", choices=X265_PRESETS, default=e.preset, metavar="PRESET",
                    help=f"x265 preset (overrides --quality): {', '.join(X265_PRESETS)}"),
            _option("--chroma", choices=encode.CHROMA_MODES, default=e.chroma,
                    help="4:2:0 chroma, average (of each 2x2 block) or lsq (least squares; overrides "
                    "--quality)"),
            _option("--layout", choices=encode.LAYOUTS, default=e.layout,
                    help=f"coded frames and boxes (default {e.layout}; benzina = the original tools')"),
            _option("--thumbnails-only", action="store_true", help="store only the <= 512x512 thumbnails"),
            _option("--encoder", choices=ENCODERS, default=e.encoder,
                    help="nvenc needs an NVIDIA GPU and PyNvVideoCodec"),
        ],
        "pictures (by default stored as TensorFlow, Keras and torchvision decode them; the summary counts "
        "each case)": [
            _option("--exif-transpose", action="store_true",
                    help="turn pictures with an EXIF orientation upright (default: stored as decoded, not "
                    "turned)"),
            _option("--alpha-background", metavar="COLOR", default=e.alpha_background,
                    help="composite pictures with transparent pixels over COLOR: white, black, grey, #RRGGBB "
                    "or R,G,B (default: the alpha channel is dropped, the colour under transparent pixels "
                    "kept)"),
        ],
        "shards, resuming and array jobs": [
            _option("--num-shards", type=int, default=None, metavar="N",
                    help="write N shards NAME-0000k-of-0000N.bzna"),
            _option("--shard-size", type=float, default=None, metavar="MB",
                    help="or shards of about this many MB (estimated)"),
            _option("--task-index", type=int, default=None, metavar="I",
                    help="convert only shards I, I+T, I+2T, ... of the plan (with --num-tasks T): this run's "
                    "task number in an array job ($SLURM_ARRAY_TASK_ID)"),
            _option("--num-tasks", type=int, default=None, metavar="T",
                    help="how many separate runs (array job tasks, hosts) share the plan, each with its "
                    "--task-index"),
            _renamed("--worker-index", "--task-index", "task_index", type=int, metavar="I"),
            _renamed("--num-workers", "--num-tasks", "num_tasks", type=int, metavar="T"),
            _option("--overwrite", action="store_true",
                    help="replace existing outputs (else finished ones are skipped)"),
        ],
        "bad images and labels": [
            _option("--lenient", action="store_true", help="keep images the decoder had to repair"),
            _option("--max-pixels", type=_max_pixels, default=e.max_pixels, metavar="N",
                    help="a picture of more pixels (width x height) than N is refused from its header, "
                    "before it is decoded (a decompression bomb), as a bad image (see --on-error); none: no "
                    f"limit (default {e.max_pixels:,}, Pillow's; a worker takes about 43 bytes per pixel)"),
            _option("--max-image-bytes", type=_byte_count, default=e.max_image_bytes, metavar="N",
                    help="the largest encoded image read (a file, a tar member, a record's bytes), in bytes "
                    f"or with a unit (512M, 1G; default {e.max_image_bytes >> 20}M): a larger one is refused "
                    "unread, a bad record (see --on-error); a tar shard's label members (cls, json) are "
                    "limited to 1M"),
            _option("--missing-label", type=int, default=None,
                    help="target stored for unlabelled images followed by labelled ones"),
            _option("--negative-labels", choices=("error", "unlabelled"), default="error",
                    help="a negative label (after --label-offset): error (default) names the record; "
                    "unlabelled stores the image as unlabelled (TFDS writes -1 for images without a label)"),
            _option("--on-error", choices=("raise", "skip"), default="raise",
                    help="a record the source cannot read (a truncated tar member, a sample without an "
                    "image, a null image in a row, a label that is not an integer, a file name that is not "
                    "UTF-8, an image over --max-image-bytes) or an image that cannot be decoded (HTML saved "
                    "as .jpg, a truncated JPEG without --lenient, a picture over --max-pixels): raise "
                    "(default) stops, naming the file and the key, row or record; skip leaves it out and "
                    "counts it in the summary"),
            _option("--class-names", type=_path, default=None,
                    help="a text file of class names, one per line, by target (a folder or GulpIO source "
                    "needs one per class: with --classes, one per class listed, renaming them by target)"),
        ],
        _CONVERT_SOURCE_OPTIONS: [
            _option("--image-key", default=None,
                    help="tfrecord, tfds: the image feature (default: image/encoded, or TFDS's image, "
                    "recognised; tfds: the folder's); webdataset: the image member's extension (default: "
                    "the sample's one jpg, png, webp, ... member)"),
            _option("--label-key", default=None,
                    help="tfrecord, tfds: the label feature (default: image/class/label, or TFDS's label; "
                    "tfds: the folder's); gulp: the meta_data key (default label); webdataset: the label "
                    "member's extension, or json:FIELD (default: cls, cls.txt or the json's label field, "
                    "whichever the first sample has); '' for none"),
            _option("--per-shard-keys", action="store_true",
                    help="webdataset: for shards whose keys start again in each shard (00000, ... in every "
                    "one): store each sample as SHARD/KEY, SHARD its shard's file name without .tar "
                    "(train-000001/00000). Else a key in two shards is refused (a shard named twice or "
                    "copied); a key twice in one shard is refused either way"),
            _option("--filename-key", default=None,
                    help="tfrecord: the file name feature (default: image/filename, or TFDS's file_name); "
                    "'' for none"),
            _option("--class-text-key", default=None,
                    help="tfrecord: the feature of each record's class name, checked against the other "
                    "records' and --class-names (default: image/class/text in the classic layout); '' for "
                    "none: the records' class names are not read"),
            _option("--label-offset", type=int, default=None,
                    help="tfrecord: added to labels; -1 for the classic ImageNet 1..1000 (required for "
                    "records in the classic layout: their labels may start at 1 or at 0)"),
            _option("--compression", choices=("GZIP", "ZLIB"), default=None,
                    help="tfrecord: the files' compression"),
            _option("--allow-unlabelled", action="store_true",
                    help="store images whose label is missing as unlabelled images, after the labelled ones "
                    "(else each is a bad record, see --on-error): folder: image files beside the class "
                    "folders; webdataset: a sample without its label member or json field; tfrecord, tfds: "
                    "a record without its label feature; parquet, hf: a null label; gulp: a video without "
                    "its label key"),
            _option("--classes", type=_path, default=None,
                    help="folder, gulp: the classes by target, each class folder's name (gulp: each string "
                    "label) at its target: a text file of names, one per line (UTF-8), or a .bzna file whose "
                    "stored class names are taken (a split lacking a class: --classes train.bzna numbers "
                    "val/'s classes as train.bzna does). A class folder or label not listed is refused; a "
                    "listed class without images keeps its name and target. Default: the class folders' (the "
                    "string labels') sorted names"),
            _option("--allow-outside-paths", action="store_true",
                    help="parquet, hf: read the files a dataset names outside its own folder (for a trusted "
                    "dataset): a row's image path when its bytes are null, and hf's state.json data files. "
                    "Else only files inside the folder of the dataset (parquet: of the file naming them) are "
                    "read, links resolved: another is refused, or the row is a bad record (see --on-error)"),
            _option("--image-column", default=None,
                    help="parquet, hf: the column of encoded images, bytes or the datasets Image {bytes, "
                    "path} struct (default: recognised; several candidates are refused, listing them)"),
            _option("--label-column", default=None,
                    help="parquet, hf: the integer label column (default: the datasets ClassLabel column, "
                    "else the one integer column; without a ClassLabel, a column named label or labels that "
                    "is not integers is refused); '' for none"),
            _option("--split", default=None,
                    help="tfds, hf: the split to convert (train, test, ...; a TFDS folder's "
                    "dataset_info.json, a DatasetDict folder's dataset_dict.json list them)"),
        ],
    }  # fmt: skip


def _source(args):
    """The source of ``bzna-tf convert KIND``, refusing flags that KIND does not take."""
    from bzna_tf.convert import SOURCES

    cls = SOURCES[args.kind]
    rows = _convert_options()[_CONVERT_SOURCE_OPTIONS]
    defaults = {_dest(flags): kwargs.get("default", False) for flags, kwargs in rows}
    given = [k for k, default in defaults.items() if getattr(args, k) != default]
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
    """The EncodeOptions of ``bzna-tf convert``: each of its fields is the option of the same name."""
    import dataclasses

    from bzna_tf.convert import EncodeOptions

    # A deprecated quality's FutureWarning is said as the command's own line, not as Python's
    # warning with a file and a line number.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        options = EncodeOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(EncodeOptions)})
    for w in caught:
        if issubclass(w.category, FutureWarning):
            print(f"bzna-tf convert: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return options


def _check_counts(args) -> None:
    """The counts of ``bzna-tf convert``, checked with the flags' names before any work."""
    for flag, value, low in (
        ("--processes", args.processes, 0),
        ("--num-shards", args.num_shards, 1),
        ("--num-tasks", args.num_tasks, 1),
        ("--task-index", args.task_index, 0),
    ):
        if value is not None and value < low:
            raise ValueError(f"Expected {flag} >= {low}. Received: {flag} {value}")
    if args.shard_size is not None and not 0 < args.shard_size < float("inf"):  # also NaN
        raise ValueError(f"Expected --shard-size > 0 (megabytes). Received: --shard-size {args.shard_size:g}")
    if (args.task_index is None) != (args.num_tasks is None):
        given = "--task-index" if args.num_tasks is None else "--num-tasks"
        raise ValueError(
            f"Expected --task-index and --num-tasks together. Received: {given} "
            f"{args.task_index if args.num_tasks is None else args.num_tasks} alone"
        )
    if args.task_index is not None and args.task_index >= args.num_tasks:
        raise ValueError(
            f"Expected --task-index in [0, {args.num_tasks}) (--num-tasks {args.num_tasks}). "
            f"Received: --task-index {args.task_index}"
        )


def _convert(args) -> int:
    from bzna_tf.convert import DEFAULT_SEED, SOURCES, ConversionError, ConversionInterrupted, convert
    from bzna_tf.convert.plan import check_order, shard_paths
    from bzna_tf.convert.sources import read_class_names
    from bzna_tf.format.atomic import make_parent

    # Everything that can be checked is checked before the source is read (a folder of a million images
    # takes minutes to list) and before any image is encoded.
    encoding = _encoding(args)
    if args.seed is None:
        args.seed = DEFAULT_SEED
    elif args.order == "source":  # the file would be the same with any seed: the seed given did nothing
        raise _UsageError(
            f"--seed {args.seed} picks the shuffle of --order shuffle; --order source keeps the sources' "
            "order and uses no seed: leave out --seed, or --order source"
        )
    check_order(args.order, args.seed)
    _check_counts(args)
    shard_paths(args.output, None)  # a file name, not a folder
    check_cli_output = getattr(SOURCES[args.kind], "check_cli_output", None)
    if check_cli_output is not None:  # an output whose folder, made in a source folder, would be a class
        check_cli_output(args.sources, args.output)
    make_parent(args.output)
    class_names = read_class_names(args.class_names) if args.class_names else None
    source = _source(args)
    try:
        summary = convert(
            source,
            args.output,
            encoding=encoding,
            workers=args.processes,
            order=args.order,
            seed=args.seed,
            missing_label=args.missing_label,
            negative_labels=args.negative_labels,
            on_error=args.on_error,
            num_shards=args.num_shards,
            shard_size=None if args.shard_size is None else args.shard_size * 1e6,
            worker_index=args.task_index,
            num_workers=args.num_tasks,
            overwrite=args.overwrite,
            class_names=class_names,
            progress=args.progress,
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
    from bzna_tf.convert import SOURCES

    c = sub.add_parser(
        "convert",
        help="convert TFRecords, an image folder, GulpIO chunks, WebDataset shards, Parquet files, a TFDS "
        "folder or a Hugging Face dataset to .bzna (one file or shards)",
        description="Decode every image, encode it as H.265 (libx265, or NVENC) and write one .bzna file or "
        "shards, in a shuffled order (seed recorded) unless --order source. An unreadable record or an "
        "undecodable image stops it, naming the file and record, unless --on-error skip; nothing appears "
        "under a final name until that file is complete; rerunning the same command skips finished files; "
        "Ctrl-C keeps the finished ones.",
        epilog=_examples(
            "a folder with a sub-folder of pictures per class (images/cat/*.jpg, images/dog/*.jpg, ...)",
            "bzna-tf convert folder images/ pets.bzna",
            "a validation folder numbered as train.bzna numbers its classes (val/ may lack a class folder)",
            "bzna-tf convert folder val/ val.bzna --classes train.bzna",
            "ImageNet's TFRecords (labels 1..1000) as 16 shards, with 8 encoding processes",
            "bzna-tf convert tfrecord 'imagenet/train-*' train.bzna --label-offset -1 --num-shards 16 -j 8",
            "WebDataset shards, leaving out (and counting) the images that cannot be decoded",
            "bzna-tf convert webdataset 'pets-{000000..000009}.tar' pets.bzna --on-error skip",
            "a prepared TFDS dataset's train split, smaller files for small pictures",
            "bzna-tf convert tfds ~/tensorflow_datasets/mnist/3.0.1 mnist.bzna --split train "
            "--layout compact",
            "one task of a 16-task SLURM array job sharing a plan of 256 shards, logging plain lines",
            "bzna-tf convert tfrecord 'imagenet/train-*' data/train.bzna --label-offset -1 --num-shards 256 "
            "--task-index $SLURM_ARRAY_TASK_ID --num-tasks 16 --progress lines",
        ),
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
    _add_options(c, _convert_options())
    c.set_defaults(run=_convert)


def _lines(lst) -> str:
    return count(len(lst.entries), "sample line" if lst.type == "SINGLE-SAMPLE" else "file line")


def _samplelist(args) -> int:
    from bzna_tf.datasets import Dataset
    from bzna_tf.format.atomic import make_parent
    from bzna_tf.format.samplelist import SampleList
    from bzna_tf.format.shards import in_shard_order

    if args.check:
        given = [
            flag
            for flag, value in (
                ("-o", args.output),
                ("--type", args.type != "CONDUIT_HDF5_INCLUSION"),
                ("--ids", args.ids != "indices"),
                ("--split", args.split is not None),
                ("--labelled-only", args.labelled_only),
                ("--base", args.base),
                ("--no-ranges", args.no_ranges),
            )
            if value
        ]
        if given:
            raise ValueError(
                f"--check reads LIST and reports what it selects; {', '.join(given)} shape a list being "
                "written, and would change nothing here (the list says what it selects): leave them out, or "
                "leave out --check to write a list"
            )
        lst = SampleList.read(args.check)
        ds = Dataset(args.files) if args.files else Dataset(in_shard_order(lst.data_paths()))
        with ds:
            used = ds.sample_list_positions(lst)
            print(
                f"{args.check}: {lst.type}, {_lines(lst)}, "
                f"{count(len(used), 'sample')} used of {len(ds):,} in {count(len(ds.paths), 'data file')}"
            )
        return 0
    if not args.files or not args.output:
        raise _UsageError("give the .bzna files and -o LIST (or --check LIST)")
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
        epilog=_examples(
            "every labelled sample of the shards, a list to edit and give to as_dataset(sample_list=...)",
            "bzna-tf samplelist 'shards/train-*.bzna' -o lists/train.list --labelled-only",
            "the last 10% of train.bzna, one line per sample, by stored file name",
            "bzna-tf samplelist train.bzna -o val.list --split '[90%:]' --type SINGLE-SAMPLE --ids names",
            "what an edited list selects, against the files it names",
            "bzna-tf samplelist --check lists/train.list",
        ),
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
        help="the base directory on line 3 (default: the files' common one); a relative one is taken from "
        "the current directory and written absolute",
    )
    c.add_argument("--no-ranges", action="store_true", help="write every index, no 'a ... b' ranges")
    c.add_argument(
        "--check",
        metavar="LIST",
        type=_path,
        default=None,
        help="read LIST and report what it selects (with FILES, the data to resolve it against; the other "
        "options shape a list being written)",
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
        if not 0 < args.crop < float("inf"):  # also NaN
            raise ValueError(f"--crop takes the crop's side fraction, a number > 0. Received: {args.crop}")
        return CenterResizedCrop(args.crop)
    if args.crop != 1.0:
        raise ValueError(
            f"--crop is --warp center's (the crop's side fraction); --warp {args.warp} crops by --scale and "
            "--ratio (an area fraction and an aspect range)"
        )
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

    try:
        with (
            ClassificationDataset(args.files, track=args.track, split=args.split) as ds,
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always", PreviewWarning)
            p = preview(
                ds,
                args.n,
                shape=tuple(args.size),
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
        epilog=_examples(
            "16 samples at random, cropped at random as in training (RandomResizedCrop)",
            "bzna-tf preview train.bzna -o grid.png",
            "64 samples in 96 x 128 tiles, 8 a row, as as_dataset(seed=3) would warp them",
            "bzna-tf preview train.bzna -o grid.jpg --n 64 --size 96 128 --columns 8 --seed 3",
            "the first 16 samples of a validation split, centre-cropped, full-size pictures",
            "bzna-tf preview train.bzna -o val.png --split '[90%:]' --first --warp center --track bzna_input",
        ),
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
        "--size",
        type=int,
        nargs="+",
        action=_HeightWidth,
        default=[128, 128],
        help="the tiles' height and width; H alone: square tiles (default 128)",
    )
    c.add_argument(
        "--warp",
        choices=("random-resized-crop", "center", "similarity"),
        default="random-resized-crop",
        help="the augmentation (default random-resized-crop)",
    )
    c.add_argument("--scale", type=float, nargs=2, metavar=("LO", "HI"), help="area fraction range")
    c.add_argument("--ratio", type=float, nargs=2, metavar=("LO", "HI"), help="aspect ratio (w/h) range")
    c.add_argument(
        "--crop",
        type=float,
        default=1.0,
        help="--warp center: the crop's side fraction (default 1; other warps crop by --scale, --ratio)",
    )
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
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"Expected --threads (-j) >= 1. Received: --threads {args.threads}")
    if args.exclusion_list:  # before the run (hours on ImageNet), not after it
        from bzna_tf.format.samplelist import _refuse_to_write_over_data

        _refuse_to_write_over_data(args.exclusion_list)
        make_parent(args.exclusion_list)
    try:
        report = verify(
            args.files, workers=args.threads, tracks=tracks, decode=not args.no_decode, progress=args.progress
        )
    except (ValueError, OSError) as e:  # no file to verify (a pattern that matches none, ...)
        return _no_files(args, e)
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
        epilog=_examples(
            "every shard of a conversion, each picture decoded",
            "bzna-tf verify 'shards/train-*.bzna'",
            "checksums only (much quicker), 8 threads; the damaged samples as a list that leaves them out",
            "bzna-tf verify shards/ --no-decode -j 8 --exclusion-list lists/damaged.list",
            "for a script: the report as JSON",
            "bzna-tf verify train.bzna --json",
        ),
    )
    c.add_argument("files", nargs="+", type=_path, help=".bzna files, glob patterns or directories")
    c.add_argument(
        "-j", "--threads", type=int, default=None, metavar="N", help="threads (default: all usable cores)"
    )
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
    renamed = _renamed("--workers", "--threads (-j)", "threads", type=int, metavar="N")
    _add_options(c, {None: [renamed, *_progress_options("the progress")]})
    c.set_defaults(run=_verify)


def _port(text: str) -> int:
    """A TCP port for argparse: 0 (a free one) to 65535, as the service checks it."""
    from bzna_tf.service import _check_port

    try:
        return _check_port(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a port from 0 (a free one) to 65535, got {text!r}"
        ) from None


def _service(args) -> int:
    from bzna_tf import service

    try:
        if args.role == "dispatcher":
            server = service.dispatcher(
                args.port, work_dir=args.work_dir, fault_tolerant_mode=args.fault_tolerant
            )
        else:
            # TensorFlow's worker starts once the dispatcher answers: say so (it may be started later).
            print(f"bzna-tf service: worker connecting to the dispatcher at {args.dispatcher}", flush=True)
            server = service.worker(args.dispatcher, args.port, worker_address=args.address)
    except RuntimeError as e:  # TensorFlow's "Could not start gRPC server": the port is in use, mostly
        raise ValueError(
            f"cannot start the {args.role} on port {args.port} (in use by another process?): {e}"
        ) from None
    if args.role == "dispatcher":
        print(f"bzna-tf service: dispatcher at {server.target}", flush=True)
    else:
        print(
            f"bzna-tf service: worker for {args.dispatcher}, port {args.port or 'chosen by TensorFlow'}",
            flush=True,
        )
    # Not server.join(): it waits in C++, where Ctrl-C (SIGINT) never reaches Python. The server serves on
    # its own threads; this one sleeps until Ctrl-C (KeyboardInterrupt: exit 130) or SIGTERM.
    while True:
        time.sleep(3600)


def _add_service(sub):
    c = sub.add_parser(
        "service",
        help="run a tf.data service dispatcher or worker that knows bzna_tf's ops",
        description="Start a tf.data service server with bzna_tf's ops loaded (the dispatcher needs them to "
        "split BznaDataset for distributed_epoch, workers to run the pipeline). Runs until killed.",
        epilog=_examples(
            "the dispatcher on one host, then a worker on each host that runs input pipelines",
            "bzna-tf service dispatcher --port 5050",
            "bzna-tf service worker --dispatcher dispatcher-host:5050 --port 5051",
        ),
    )
    roles = c.add_subparsers(dest="role", required=True)
    d = roles.add_parser(
        "dispatcher",
        help="the dispatcher",
        epilog=_examples(
            "a dispatcher that keeps a journal, so that a restarted one resumes its jobs",
            "bzna-tf service dispatcher --port 5050 --fault-tolerant --work-dir /scratch/tfdata-journal",
        ),
    )
    d.add_argument("--port", type=_port, default=0, help="port to listen on (default: a free one, printed)")
    d.add_argument("--work-dir", type=_path, default=None, help="journal folder (for --fault-tolerant)")
    d.add_argument("--fault-tolerant", action="store_true", help="journal state so a restart resumes jobs")
    w = roles.add_parser(
        "worker",
        help="a worker",
        epilog=_examples(
            "a worker that the dispatcher and the trainers reach at this host's name",
            "bzna-tf service worker --dispatcher dispatcher-host:5050 --port 5051 --address worker-3:5051",
        ),
    )
    w.add_argument("--dispatcher", required=True, help="the dispatcher's HOST:PORT")
    w.add_argument("--port", type=_port, default=0, help="port to listen on (default: a free one)")
    w.add_argument(
        "--address",
        default=None,
        help="HOST:PORT the dispatcher and clients reach this worker at (default localhost:%%port%%)",
    )
    c.set_defaults(run=_service)


def build_parser() -> argparse.ArgumentParser:
    """The ``bzna-tf`` argument parser, with every subcommand (the docs' CLI reference is made from it)."""
    from bzna_tf import __version__

    p = _Parser(
        prog="bzna-tf",
        description="Benzina (.bzna) datasets for TensorFlow.",
        epilog=_examples(
            "a folder of class folders to one file; what it holds; a look at it; every picture checked",
            "bzna-tf convert folder images/ my.bzna",
            "bzna-tf info my.bzna",
            "bzna-tf preview my.bzna -o grid.png",
            "bzna-tf verify my.bzna",
            "each command's own options and examples",
            "bzna-tf convert --help",
        ),
    )
    p.add_argument("--version", action="version", version=f"bzna-tf {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser(
        "info",
        help="describe .bzna files",
        epilog=_examples(
            "samples, labels, tracks, the conversion's settings and what it left out",
            "bzna-tf info train.bzna",
            "every shard and the totals, as JSON",
            "bzna-tf info 'shards/train-*.bzna' --json",
        ),
    )
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
    _know_yourselves(p)
    return p


def _know_yourselves(parser) -> None:
    """Sets each (sub)command's parser as its ``args.parser``: main() reports a _UsageError with its usage."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(parser=command)
                _know_yourselves(command)


def _progress_alone(argv: list[str]) -> list[str]:
    """``argv`` with each ``--progress`` not followed by a mode written ``--progress=bar``: argparse
    would take the next argument (a file, a source) as the mode, and refuse it as an invalid choice."""
    from bzna_tf.format.progress import PROGRESS_MODES

    if argv[:1] not in (["convert"], ["verify"]):  # the commands with --progress (others say "unrecognized")
        return argv
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":  # what follows are positionals
            return out + argv[i:]
        # argparse takes --prog, --progr, ... for --progress (--pro could be convert's --processes too).
        named = len(arg) >= 6 and "--progress".startswith(arg)
        alone = named and (i + 1 == len(argv) or argv[i + 1] not in PROGRESS_MODES)
        out.append("--progress=bar" if alone else arg)
    return out


def _stdout_is_closed() -> bool:
    """Whether standard output is a pipe (or socket) whose reader has gone (``bzna-tf info ... | head``)."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), no file descriptor, closed
        return False


def main(argv=None) -> int:
    """Runs ``bzna-tf`` with ``argv`` (default: the process's arguments); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(_progress_alone(list(sys.argv[1:] if argv is None else argv)))
    from bzna_tf.format.shards import ListOrderWarning

    try:
        with warnings.catch_warnings():
            # A warning in Python (an order may be chosen on purpose there), an error here: the files come
            # from the shell, which lists a pattern's matches in its locale's order.
            warnings.simplefilter("error", ListOrderWarning)
            status = args.run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except ListOrderWarning as e:
        first = str(e).split(". Files are read", 1)[0]
        print(
            f"bzna-tf {args.command}: {first}. The files are read in the order given, which numbers the "
            "samples (a --split, a sample list's positions); a shell lists a pattern's matches in its "
            "locale's order (part-0, part-10, part-1 ... in en_US), which another shell may not share. List "
            "them sorted by name, as Python's sorted() does (in the shell: export LC_ALL=C, then the "
            "pattern), or in their numbers' order",
            file=sys.stderr,
        )
        return 1
    except _UsageError as e:
        args.parser.error(str(e))  # the command's usage and the message; exits with status 2
    except BrokenPipeError as e:
        if not _stdout_is_closed():
            print(f"bzna-tf {args.command}: {error_text(e)}", file=sys.stderr)
            return 1
        # The reader of the output stopped reading (head, less quit): nothing to report. Python would
        # fail again flushing stdout at exit; it goes to /dev/null. 141 = 128 + SIGPIPE, the status
        # the shell gives a program that the same closed pipe stops.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, ValueError) as e:  # BznaFormatError and SampleListError are ValueErrors
        print(f"bzna-tf {args.command}: {error_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C outside a conversion (which says more): one line, the shell's 130
        print(f"bzna-tf {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
