"""The parallel converter: sources -> decode -> H.265 -> .bzna files, sharded, resumable.

The main process reads the source and writes the files; N worker processes
(``spawn``ed, so no TensorFlow state is forked) decode each image and encode
it with x265 (one thread each, which scales better than x265's own threads on
single pictures). At most a few images per worker are in flight, so memory
stays flat whatever the dataset's size, and results are written in input
order. A record the source cannot read or an image that cannot be decoded
stops the conversion with a message naming it (``on_error="skip"`` reports,
skips and counts it instead).

Output is one file or a plan of shards (:mod:`bzna_tf.convert.plan`). Each
file is written under a deterministic temporary name (``.NAME.partial``,
locked while written) and renamed when complete, so an interrupt never leaves
a partial file under the final name, and a rerun of the same command takes
the partial file over and skips the shards already finished. Workers exit
when the main process dies, however it dies.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np

from bzna_tf.convert.encode import (
    CHROMA_MODES,
    DEFAULT_LAYOUT,
    DEFAULT_QUALITY,
    DEPRECATED_QUALITIES,
    LAYOUTS,
    NVENC_QP,
    QUALITY_PRESETS,
    check_crf,
    check_preset,
    check_quality,
    encode_image,
    layout_coded_size,
)
from bzna_tf.convert.images import (
    DEFAULT_MAX_PIXELS,
    PICTURE_FACTS,
    ImageDamagedError,
    ImageDecodeError,
    ImageTooLargeError,
    alpha_background_color,
    check_max_pixels,
    decode_picture,
    image_size,
    is_jpeg_or_png,
    unsupported_hint,
)
from bzna_tf.convert.plan import (
    DEFAULT_SEED,
    ShardSpec,
    check_order,
    conversion_facts,
    conversion_order,
    fingerprint,
    finished,
    plan_shards,
    shard_facts,
    shard_paths,
    shards_for_size,
)
from bzna_tf.convert.sources.base import (
    ALLOW_OUTSIDE_PATHS_HINT,
    NAME_NOT_UTF8,
    Item,
    SourceError,
    escaped_name,
    few,
)
from bzna_tf.format import BznaFile, BznaFormatError
from bzna_tf.format.atomic import file_error, make_parent
from bzna_tf.format.progress import PlainProgress, progress_mode
from bzna_tf.format.sample import build_image_mp4
from bzna_tf.format.sniff import not_bzna_reason, printable, read_head, sniff
from bzna_tf.format.wording import count
from bzna_tf.format.writer import BznaWriter

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "ConversionError",
    "ConversionInterrupted",
    "ConversionSummary",
    "EncodeOptions",
    "convert",
    "default_workers",
]

ENCODERS = ("x265", "nvenc")
# What a negative label does: stop the conversion naming it, or make the image unlabelled.
NEGATIVE_LABELS = ("error", "unlabelled")
# What a bad record (Item.error, an undecodable image) does: stop the conversion naming it, or skip it.
ON_ERROR = ("raise", "skip")
_SKIP_HINT = "--on-error skip (on_error='skip') leaves such records out and counts them in the summary"
_TOO_LARGE_HINT = "--max-image-bytes N (EncodeOptions(max_image_bytes=N)) takes larger images; " + _SKIP_HINT
_LENIENT_HINT = (
    "; --lenient (EncodeOptions(lenient=True)) keeps images the decoder can repair, as a truncated JPEG"
)
_MAX_PIXELS_HINT = (
    "--max-pixels N (EncodeOptions(max_pixels=N)) raises the limit, at about 43 bytes of memory per pixel "
    "in each worker; " + _SKIP_HINT
)
# The most luma samples x265 encodes in one frame (H.265 level 7.2): it refuses larger coded frames.
_X265_MAX_LUMA_SAMPLES = 142_606_336
# Images queued per worker: enough to keep every worker busy while the main
# process writes, few enough that memory does not grow with the dataset.
_IN_FLIGHT_PER_WORKER = 4
_SIGMASK = hasattr(signal, "pthread_sigmask")
# Images encoded to estimate the output size for `shard_size`.
_ESTIMATE_IMAGES = 16
DEFAULT_MAX_IMAGE_BYTES = 256 << 20
"""The largest encoded image a conversion reads unless told otherwise (``EncodeOptions.max_image_bytes``,
``--max-image-bytes``), 256 MiB: a larger file or tar member is refused before it is read, so that one
hostile member (a sparse 6 GB ``001.jpg``) cannot exhaust the memory."""


class ConversionError(RuntimeError):
    """A conversion that stopped: an unreadable record or image, a bad label, an existing output."""


class ConversionInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGINT) during a conversion: what was kept, and how to go on.

    A ``KeyboardInterrupt``, so code that stops on one still stops; its
    message is one line for the command line.

    Attributes:
      summary: the :class:`ConversionSummary` of the files finished so far
        (``written`` by this run, ``finished`` before it).
      removed: the unfinished file's temporary name, removed, or None.
      remaining: the shards of this run's share that are not finished (None when the interrupt came
        before they were known: while the source was read or the finished files checked).
    """

    def __init__(self, summary, removed, remaining):
        self.summary, self.removed, self.remaining = summary, removed, remaining
        super().__init__(self._text())

    def _text(self):
        s = self.summary
        kept = s.written + [p for p, _ in s.finished]
        if s.num_shards > 1:
            names = ", ".join(os.path.basename(p) for p in sorted(kept)[:3])
            names += ", ..." if len(kept) > 3 else ""
            what = f"kept {len(kept)} of {s.num_shards} shards finished" + (f" ({names})" if kept else "")
        else:
            what = f"kept {kept[0]}" if kept else "nothing finished"
        removed = f"; removed the unfinished {os.path.basename(self.removed)}" if self.removed else ""
        if self.remaining == 0:  # stopped after its last file was written
            again = "nothing is left to convert"
        elif kept:
            rest = f"the other {count(self.remaining, 'shard')}" if self.remaining else "the rest"
            again = f"run the same command again to convert {rest} (finished ones are skipped)"
        else:
            one = self.remaining == 1 or (self.remaining is None and s.num_shards <= 1)
            again = f"run the same command again to convert {'it' if one else 'them'}"
        return f"interrupted: {what}{removed}; {again}"


@dataclass(frozen=True)
class EncodeOptions:
    """How each image is decoded and encoded; every field is checked when the object is made.

    ``crf``, ``preset`` and ``chroma`` left as None take the ``quality``'s
    value (:attr:`settings` gives the values used, with the quality's x265
    options, ``x265_params``).

    Attributes:
      quality: a named choice of preset, CRF, chroma and x265 options, one of
        ``QUALITY_PRESETS``: "training" (the default: at least the RGB PSNR
        of a JPEG quality-90 copy in about 0.55x its bytes), "quick" (the same PSNR for a
        third of the CPU time, bigger files) or "archival" (near-lossless:
        Benzina's settings with least-squares chroma). "balanced" and "fast",
        the qualities before "training", are deprecated: they keep their
        settings for one release, with a FutureWarning.
      crf: x265 constant rate factor in [0, 51], lower is better and bigger; the
        constant QP with NVENC (None there: the quality's ``NVENC_QP``). None: the quality's.
      preset: x265 preset, one of ``X265_PRESETS`` ("ultrafast" ... "placebo").
        None: the quality's. Not with NVENC, which has its own.
      chroma: how 4:2:0 chroma is made, "average" (of each 2x2 block, close to Benzina's)
        or "lsq" (least squares against the loader's upsampling). None: the
        quality's. Not with NVENC.
      layout: "benzina" (the original tools' frames and boxes, default) or "compact".
      thumbnails_only: store only the <= 512x512 thumbnails (a much smaller file).
      encoder: "x265" (CPU, default) or "nvenc" (NVIDIA GPU through PyNvVideoCodec).
      lenient: keep pictures the image decoder had to repair, as it concealed
        the damage (a truncated JPEG with a green bottom, FFmpeg's zeroed
        YCbCr), instead of skipping them as undecodable; each is counted as
        ``"repaired"`` in the summary's and the file's pictures.
      exif_transpose: turn pictures with an EXIF orientation upright (rotated or
        mirrored as it says). By default they are stored as the file's pixels
        are, as TensorFlow, Keras and torchvision decode them.
      alpha_background: composite pictures with transparent pixels over this
        colour ("white", "black", "grey", "#RRGGBB", "R,G,B" or (R, G, B);
        stored as (R, G, B)). None (default): the alpha channel is dropped and
        the colour under transparent pixels kept, as those libraries do.
      max_pixels: skip (or, with ``on_error="raise"``, stop at) a picture of more
        pixels (width x height) than this, refused from its header before it is
        decoded (a decompression bomb: a small PNG can declare a huge picture).
        Default :data:`~bzna_tf.convert.DEFAULT_MAX_PIXELS` (89,478,485, Pillow's
        limit; a worker takes about 43 bytes per pixel, 4 GB at the limit).
        None: no limit but FFmpeg's and x265's (142,606,336 pixels per frame).
      max_image_bytes: the largest encoded image read, in bytes (default
        ``DEFAULT_MAX_IMAGE_BYTES``, 256 MiB): a larger one (a tar member, an
        image file, a record's bytes) is refused before it is read, as a bad
        record (``convert``'s ``on_error``). Raise it for larger images. It
        decides only which images are refused, so it is not part of the
        conversion's fingerprint: a rerun with a larger limit converts again
        only the finished shards that left images out for their size.

    Raises:
      ValueError: a value out of its range, naming the field and listing the valid ones.
    """

    quality: str = DEFAULT_QUALITY
    crf: float | None = None
    preset: str | None = None
    chroma: str | None = None
    layout: str = DEFAULT_LAYOUT
    thumbnails_only: bool = False
    encoder: str = "x265"
    lenient: bool = False
    exif_transpose: bool = False
    alpha_background: tuple | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES

    def __post_init__(self):
        object.__setattr__(self, "alpha_background", alpha_background_color(self.alpha_background))
        check_max_pixels(self.max_pixels)
        if self.max_pixels is not None:
            object.__setattr__(self, "max_pixels", int(self.max_pixels))
        check_quality(self.quality, stacklevel=3)  # a deprecated name warns once, naming the caller's line
        if self.crf is not None:
            check_crf(self.crf)
        if self.preset is not None:
            check_preset(self.preset)
        if self.chroma is not None and self.chroma not in CHROMA_MODES:
            raise ValueError(f"Expected `chroma` in {CHROMA_MODES}. Received: chroma={self.chroma!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"Expected `layout` in {LAYOUTS}. Received: layout={self.layout!r}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"Expected `encoder` in {ENCODERS}. Received: encoder={self.encoder!r}")
        if self.encoder == "nvenc" and (self.preset is not None or self.chroma is not None):
            raise ValueError(
                "Expected no `preset` or `chroma` with encoder='nvenc' (NVENC uses its own preset, P7, and "
                f"averaged chroma). Received: preset={self.preset!r}, chroma={self.chroma!r}"
            )
        m = self.max_image_bytes
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(
                f"Expected `max_image_bytes` as an integer >= 1. Received: max_image_bytes={m!r}"
            )
        for name in ("thumbnails_only", "lenient", "exif_transpose"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"Expected `{name}` as True or False. Received: {name}={getattr(self, name)!r}"
                )

    @property
    def settings(self) -> dict:
        """Every field, the quality's values filled in, and its ``x265_params``: what decides the bytes."""
        chosen = dict(QUALITY_PRESETS.get(self.quality) or DEPRECATED_QUALITIES[self.quality])
        if self.encoder == "nvenc":
            chosen["crf"] = NVENC_QP[self.quality]
        out = dataclasses.asdict(self)
        for key in ("crf", "preset", "chroma"):
            if out[key] is None:
                out[key] = chosen[key]
        out["crf"] = float(out["crf"])  # 20 and 20.0 (the command line's) are one conversion
        out["x265_params"] = chosen["x265_params"] if self.encoder == "x265" else ""
        return out


@dataclass
class ConversionSummary:
    """What a conversion did.

    Attributes:
      output: the ``output`` argument (the file, or the name the shards are derived from).
      images: samples written by this run.
      skipped: (origin, reason) of every image skipped by this run.
      seconds: wall time.
      bytes: the size of the files written by this run.
      targets: (smallest, largest) target written by this run, or None.
      labelled: images written by this run with a label.
      unlabelled: {why: [count, origin of the first]} of the images written by this run
        without a label, by reason ("beside the class folders (--allow-unlabelled)").
      written: the files this run wrote, in order.
      finished: (file, samples) of the shards found finished and left alone.
      num_shards: the plan's shard count (1 for one file).
      class_names: the class names stored (indexed by target), or None.
      order: "shuffle" or "source" (see :func:`convert`).
      seed: the shuffle's seed (None with ``order="source"``).
      notes: the source's remarks (empty classes, files not taken, ...).
      pictures: {fact: [count, origin of the first]} of the pictures written by this run
        that decoding changed or could have changed (keys of
        :data:`~bzna_tf.convert.images.PICTURE_FACTS`: an EXIF orientation, transparent
        pixels, CMYK, more than 8 bits per channel).
      exif_transpose, alpha_background: the encoding's, to say what was done to them.
      idle: why this process had no shard to convert (an array task past the plan's shards), or None.
    """

    output: str
    images: int = 0
    skipped: list = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0
    targets: tuple | None = None
    labelled: int = 0
    unlabelled: dict = field(default_factory=dict)
    written: list = field(default_factory=list)
    finished: list = field(default_factory=list)
    num_shards: int = 1
    class_names: list | None = None
    order: str = "source"
    seed: int | None = None
    notes: list = field(default_factory=list)
    pictures: dict = field(default_factory=dict)
    exif_transpose: bool = False
    alpha_background: tuple | None = None
    idle: str | None = None

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_image(self) -> float:
        return self.bytes / self.images if self.images else 0.0

    def __str__(self):
        lines = []
        if self.written:
            what = (
                self.written[0]
                if len(self.written) == 1
                # Named one by one (an array task's shards are not a range): the first two and the last.
                else f"{len(self.written)} of {self.num_shards} shards ("
                + ", ".join(os.path.basename(p) for p in self.written[:2])
                + (", ..." if len(self.written) > 3 else "")
                + (f", {os.path.basename(self.written[-1])}" if len(self.written) > 2 else "")
                + ")"
            )
            lines.append(
                f"wrote {what}: {self.images} images, {self.bytes / 1e6:.1f} MB "
                f"({self.bytes_per_image / 1e3:.1f} kB per image) in {self.seconds:.1f} s "
                f"({self.images_per_second:.1f} images/s)"
            )
        if self.finished:
            n = sum(count for _, count in self.finished)
            names = ", ".join(os.path.basename(p) for p, _ in self.finished[:4])
            more = f", ... ({len(self.finished) - 4} more)" if len(self.finished) > 4 else ""
            verb = "was" if len(self.finished) == 1 else "were"
            lines.append(
                f"skipped {len(self.finished)} {'file' if len(self.finished) == 1 else 'files'} that {verb} "
                f"already converted from these sources with these options ({n} images): {names}{more}"
            )
        if not lines:
            lines.append(f"nothing to do for {self.output}" + (f": {self.idle}" if self.idle else ""))
        if self.order == "shuffle":
            lines.append(f"order: shuffled with seed {self.seed} (the same on every rerun)")
        elif self.num_shards > 1 or self.written:
            lines.append("order: the source's")
        lines += self.notes
        if self.written or self.images:
            n = sum(c for c, _ in self.unlabelled.values())
            skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
            lines.append(f"labels: {self.labelled} labelled, {n} unlabelled{skipped}")
            for why, (k, first) in self.unlabelled.items():
                lines.append(
                    f"  unlabelled: {count(k, 'image')} {why}, {'the first ' if k > 1 else ''}{first}"
                )
        lines += self._picture_lines()
        if self.targets is not None:
            lines.append(f"targets {self.targets[0]}..{self.targets[1]}")
            if self.targets == (1, 1000):
                lines.append(
                    "note: targets 1..1000 look like the classic ImageNet TFRecords' 1-based labels; "
                    "convert with label_offset=-1 (--label-offset -1) for 0..999"
                )
        if self.class_names:
            known = [(t, n) for t, n in enumerate(self.class_names) if n is not None]
            shown = ", ".join(f"{t} {n}" for t, n in known[:8])
            more = f", ... ({len(known) - 8} more)" if len(known) > 8 else ""
            lines.append(f"class names stored ({len(known)}): {shown}{more}")
        if self.skipped:
            lines.append(f"skipped {count(len(self.skipped), 'image')} that could not be read or decoded:")
            lines += [f"  {origin}: {reason}" for origin, reason in self.skipped[:20]]
            if len(self.skipped) > 20:
                lines.append(f"  ... and {len(self.skipped) - 20} more")
        return "\n".join(lines)

    def _picture_lines(self):
        out = []
        for fact in PICTURE_FACTS:
            if fact not in self.pictures:
                continue
            k, first = self.pictures[fact]
            what = picture_fact_words(fact, k, self.exif_transpose, self.alpha_background)
            out.append(f"pictures: {what}, {'the first ' if k > 1 else ''}{first}")
        return out


def picture_fact_words(fact, k, exif_transpose=False, alpha_background=None) -> str:
    """``"2 images with an EXIF orientation, stored as decoded ..."``: what was done to ``k`` pictures."""
    images = count(k, "image")
    if fact == "exif_orientation":
        if exif_transpose:
            return f"{images} with an EXIF orientation turned upright (--exif-transpose)"
        return (
            f"{images} with an EXIF orientation stored as decoded, not turned upright (as TensorFlow, Keras "
            "and torchvision decode them; --exif-transpose turns them)"
        )
    if fact == "alpha":
        if alpha_background is not None:
            color = tuple(alpha_background)
            return f"{images} with transparent pixels composited over {color} (--alpha-background)"
        return (
            f"{images} with transparent pixels stored without their alpha, the colour under them kept (as "
            "TensorFlow, Keras and torchvision decode them; --alpha-background COLOR composites them)"
        )
    if fact == "tiff_orientation":
        tiffs = count(k, "TIFF image")
        return f"{tiffs} turned upright by their orientation tag (as Pillow and torchvision open them)"
    if fact == "cmyk":
        return f"{count(k, 'CMYK image')} converted to RGB"
    if fact == "repaired":
        return f"{images} with decoding errors stored as the decoder concealed them (--lenient)"
    return f"{images} with more than 8 bits per channel reduced to 8 (the high byte)"


def default_workers() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _unencodable(size, settings) -> str | None:
    """Why x265 cannot encode a picture of ``size`` (width, height) as ``settings`` say, or None.

    Its coded frame (the picture padded to the layout's blocks) over H.265's largest level: x265 refuses it.
    """
    if settings["encoder"] != "x265" or settings["thumbnails_only"]:  # NVENC says its own limits
        return None
    cw, ch = layout_coded_size(size, settings["layout"])
    if cw * ch <= _X265_MAX_LUMA_SAMPLES:
        return None
    return (
        f"{size[0]} x {size[1]} pixels, coded as {cw} x {ch} = {cw * ch / 1e6:.1f} M pixels: more than x265 "
        f"encodes in one frame ({_X265_MAX_LUMA_SAMPLES:,}, H.265 level 7.2)"
    )


def encode_item(item: Item, settings: dict):
    """Decodes and encodes one image (in a worker): ("ok", input, thumb, facts, pixels) or ("skip", reason,
    hint[, cause]).

    ``hint`` says how to go on; ``facts``: what decoding did to the picture
    (:func:`~bzna_tf.convert.images.decode_picture`); ``pixels``: its width x height;
    ``cause``: "max_pixels" for a picture over ``settings["max_pixels"]``.

    ``settings``: :attr:`EncodeOptions.settings`.
    """
    if item.error is not None:  # a record the source could not read, skipped (on_error="skip")
        return ("skip", item.error, _SKIP_HINT)
    try:
        data = item.read(settings.get("max_image_bytes", DEFAULT_MAX_IMAGE_BYTES))
    except SourceError as e:  # a file the data named, outside its folder
        return ("skip", f"{e}; {ALLOW_OUTSIDE_PATHS_HINT}", _SKIP_HINT)
    except ValueError as e:  # over the limit: counted apart, see _ShardWriter.close
        return ("skip", str(e), _TOO_LARGE_HINT)
    except OSError as e:
        # The origin is the file itself for a folder, a row that names it for Parquet: name it once.
        what = "cannot read it" if item.origin == item.path else f"cannot read {item.path}"
        return ("skip", file_error(e, item.path, what).strerror or str(e), _SKIP_HINT)
    max_pixels = settings["max_pixels"]
    declared = image_size(data)
    if declared is not None and (max_pixels is None or declared[0] * declared[1] <= max_pixels):
        # Refused before decoding: it could never be stored.
        why = _unencodable(declared, settings)
        if why is not None:
            return ("skip", why, _SKIP_HINT)
    try:
        rgb, facts = decode_picture(
            data,
            lenient=settings["lenient"],
            exif_transpose=settings["exif_transpose"],
            alpha_background=settings["alpha_background"],
            max_pixels=max_pixels,
        )
    except ImageTooLargeError as e:
        return ("skip", f"{e} (--max-pixels)", _MAX_PIXELS_HINT, "max_pixels")
    except ImageDecodeError as e:
        damaged = isinstance(e, ImageDamagedError)  # whatever the format: --lenient keeps it
        hint = None if damaged else unsupported_hint(data)
        if hint is not None:
            return ("skip", f"{e}; {hint}", _SKIP_HINT)
        repairable = not settings["lenient"] and (damaged or is_jpeg_or_png(data))
        return ("skip", str(e), _SKIP_HINT + _LENIENT_HINT if repairable else _SKIP_HINT)
    size = (rgb.shape[1], rgb.shape[0])
    why = _unencodable(size, settings)
    if why is not None:
        return ("skip", why, _SKIP_HINT)
    if settings["encoder"] == "nvenc":
        from bzna_tf.convert.nvenc import encode_image_nvenc

        inp, thumb = encode_image_nvenc(
            rgb, qp=settings["crf"], thumbnails_only=settings["thumbnails_only"], layout=settings["layout"]
        )
    else:
        import av

        # One x265 thread per picture whatever `workers` is: x265 records its thread pools in the
        # options SEI, and every `workers` value (a rerun, a Beam worker) must give the same bytes.
        try:
            inp, thumb = encode_image(
                rgb,
                crf=settings["crf"],
                preset=settings["preset"],
                chroma=settings["chroma"],
                x265_params=settings["x265_params"],
                threads=1,
                thumbnails_only=settings["thumbnails_only"],
                layout=settings["layout"],
            )
        except av.FFmpegError as e:  # named by the converter, as any image it skips or stops at
            why = getattr(e, "strerror", None) or str(e) or type(e).__name__
            return ("skip", f"x265 cannot encode its {size[0]} x {size[1]} picture ({why})", _SKIP_HINT)
    return ("ok", inp, thumb, facts, size[0] * size[1])


def _die_with_parent(parent_pid: int) -> None:
    """Worker initializer: exit as soon as the converting process is gone, however it went; ignore Ctrl-C.

    On Linux the kernel sends SIGKILL when the parent dies (``PR_SET_PDEATHSIG``);
    everywhere, a daemon thread also checks the parent every second, since a
    worker of a killed parent is re-parented and would otherwise idle forever.
    A terminal's Ctrl-C sends SIGINT to every process of the job: the parent
    alone handles it (it finishes the images in flight and stops the workers),
    so no worker prints a traceback or leaves the pool broken. A worker starts
    with SIGINT blocked (:func:`_sigint_held`), so a Ctrl-C while it imports,
    before this runs, is held, then dropped here.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _SIGMASK:  # started with it blocked (_sigint_held): ignored from now on
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # died before the line above took effect
        os._exit(1)

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="bzna_tf-parent-watch", daemon=True).start()


def _check_int(value, arg, low, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"Expected `{arg}` as an integer >= {low}. Received: {arg}={value!r}")


def _check_source(source) -> None:
    """TypeError for a path given as ``source``: which kind of source it is, only the caller can say."""
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(source)
        raise TypeError(
            "Expected `source` as a bzna_tf.convert source (ImageFolderSource, TFRecordSource, "
            "WebDatasetSource, GulpSource, ParquetSource, TFDSSource, HFSource), a list of Items or an "
            f"iterable of them. Received a path: source={path!r}. For a folder of class folders: "
            f"convert(ImageFolderSource({path!r}), ...), as `bzna-tf convert folder` does"
        )


def _check_arguments(
    encoding, workers, missing_label, negative_labels, order, seed, num_shards, shard_size, on_error="raise"
):
    """The checked ``encoding`` (an EncodeOptions); ValueError for any bad argument, before any work."""
    if encoding is None:
        encoding = EncodeOptions()
    if not isinstance(encoding, EncodeOptions):
        raise TypeError(
            "Expected `encoding` as a bzna_tf.convert.EncodeOptions (e.g. EncodeOptions(quality='fast')). "
            f"Received: encoding={encoding!r}"
        )
    _check_int(workers, "workers", 0)
    if missing_label is not None and (isinstance(missing_label, bool) or not isinstance(missing_label, int)):
        raise ValueError(
            f"Expected `missing_label` as None or an integer. Received: missing_label={missing_label!r}"
        )
    if missing_label is not None and missing_label >= 0:
        raise ValueError(
            f"Expected a negative `missing_label` (--missing-label), such as -1: it marks the images without "
            f"a label, and readers take a target of 0 or more as a class, so every such image would be "
            f"trained on as class {missing_label}. Received: missing_label={missing_label}"
        )
    if negative_labels not in NEGATIVE_LABELS:
        raise ValueError(
            f"Expected `negative_labels` in {NEGATIVE_LABELS}. Received: negative_labels={negative_labels!r}"
        )
    if on_error not in ON_ERROR:
        raise ValueError(f"Expected `on_error` in {ON_ERROR}. Received: on_error={on_error!r}")
    check_order(order, seed)
    if num_shards is not None and shard_size is not None:
        raise ValueError("Expected `num_shards` or `shard_size`, not both")
    if encoding.encoder == "nvenc":
        from bzna_tf.convert.nvenc import nvenc_error

        reason = nvenc_error()
        if reason:
            raise ConversionError(f"the NVENC encoder is unavailable: {reason}")
    return encoding


def _selected(plan, shards, worker_index, num_workers):
    """The shards this process converts: ``shards``, or every ``num_workers``-th from ``worker_index``."""
    if (worker_index is None) != (num_workers is None):
        raise ValueError(
            "Expected `worker_index` and `num_workers` together. "
            f"Received: worker_index={worker_index!r}, num_workers={num_workers!r}"
        )
    if shards is not None and worker_index is not None:
        raise ValueError("Expected `shards` or `worker_index`/`num_workers`, not both")
    if worker_index is not None:
        _check_int(num_workers, "num_workers", 1, allow_none=False)
        if (
            isinstance(worker_index, bool)
            or not isinstance(worker_index, int)
            or not 0 <= worker_index < num_workers
        ):
            raise ValueError(
                f"Expected `worker_index` in [0, {num_workers}). Received: worker_index={worker_index!r}"
            )
        return [s for s in plan if s.index % num_workers == worker_index]
    if shards is None:
        return list(plan)
    wanted = sorted(set(shards))
    bad = [k for k in wanted if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(plan)]
    if bad or not wanted:
        raise ValueError(
            f"Expected `shards` as shard numbers in [0, {len(plan)}). Received: shards={list(shards)!r}"
        )
    return [plan[k] for k in wanted]


def _idle_task(plan, worker_index, num_workers, shard_size) -> str:
    """Why the array task ``worker_index`` of ``num_workers`` has no shard of ``plan`` to convert (more
    tasks than shards: the plan has one file without ``num_shards``)."""
    n = len(plan)
    tasks = {1: "task 0 converts", 2: "tasks 0 and 1 convert"}.get(n, f"tasks 0 to {n - 1} convert")
    smaller = " or a smaller --shard-size" if shard_size is not None else ""
    return (
        f"task {worker_index} of {num_workers} has no shard to convert: the plan has {count(n, 'file')}, "
        f"which {tasks} (give --num-shards N >= --num-tasks{smaller} to share the conversion among the "
        "tasks; num_shards >= num_workers in Python)"
    )


def _replace_sigint(handler):
    """Sets ``handler`` for SIGINT and returns the Python handler it replaced, or does nothing and returns
    None: outside the main thread (where no KeyboardInterrupt is raised), and where SIGINT is ignored, has
    its default action or a handler set outside Python."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        return None
    signal.signal(signal.SIGINT, handler)
    return previous


def _worker_processes(pool) -> dict:
    """A ProcessPoolExecutor's started worker processes by pid (its private ``_processes``: none where a
    Python lacks it, or after its shutdown)."""
    return getattr(pool, "_processes", None) or {}


@contextlib.contextmanager
def _sigint_held():
    """Holds back Ctrl-C while the pool may start a worker process (its ``submit``).

    SIGINT is blocked in this thread, and the blocked mask is inherited by the process started (a
    disposition set in Python is not: it is reset by exec), so a worker takes a Ctrl-C only once its
    initializer ignores it (:func:`_die_with_parent`): none prints a KeyboardInterrupt traceback from
    its imports. In this process a Ctrl-C meanwhile is held (blocked, or taken by a handler that notes
    it where another thread receives it) and raised once the pool has started and counted the worker: a
    KeyboardInterrupt in the middle would leave a worker that is never told to stop.
    """
    caught = []
    previous = _replace_sigint(lambda signum, frame: caught.append((signum, frame)))
    try:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if _SIGMASK else None
        try:
            yield
        finally:
            if blocked is not None and signal.SIGINT not in blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a held one is noted now
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if caught:
        previous(*caught[0])


class _Encoder:
    """Encodes items in order, in this process or in a pool of workers, started on first use.

    When the work stops (Ctrl-C, an error, or its end), the pool finishes the images in flight and its
    workers exit; a Ctrl-C meanwhile stops them at once (:meth:`_stopping`).
    """

    def __init__(self, workers, settings):
        self.workers, self.settings = workers, settings
        self.pool = None
        self._previous = None  # the SIGINT handler that _stopping replaced, until __exit__ puts it back
        self._stopped = None  # (signum, frame) of a Ctrl-C that _stop_now took

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.pool is None:
            return
        try:
            self._stopping()
            self.pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:  # a Ctrl-C before _stop_now took over: the workers stop all the same
            self._terminate()
            self.pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            self.pool = None
            previous, self._previous = self._previous, None
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if self._stopped is not None and (exc_type is None or not issubclass(exc_type, KeyboardInterrupt)):
            # Interrupted with its files all written, or while stopping after an error: the caller's
            # handler hears of it (Python's raises KeyboardInterrupt, in place of the error).
            previous(*self._stopped)

    def _stopping(self):
        """From now on, until :meth:`__exit__` is done, a Ctrl-C stops the workers at once (they hold no
        final file) instead of raising KeyboardInterrupt (:meth:`_stop_now`).

        Called as soon as the work stops, in :meth:`run`, so that a second Ctrl-C while the first is
        handled (the unfinished file removed, the images in flight finished) is one too. A
        KeyboardInterrupt raised in the pool's shutdown would break off its join of the pool's thread,
        which then passes for stopped while it runs: the exit waited for workers never told to stop.
        """
        if self.pool is not None and self._previous is None:
            self._previous = _replace_sigint(self._stop_now)

    def _stop_now(self, signum, frame):
        self._stopped = (signum, frame)
        self._terminate()

    def _terminate(self):
        """Stops the workers now (SIGTERM); the pool then shuts down as after a worker that died."""
        # Every worker is started by now: they start only in submit (in run, in this thread).
        for p in list(_worker_processes(self.pool).values()):
            p.terminate()
        if sys.version_info < (3, 11):
            # CPython gh-94777: 3.10's pool never closes the reading end of its call queue after workers
            # died, so its feeder thread stays blocked writing an item of over 64 KiB (a record's bytes)
            # that no worker reads, and the shutdown never returns. Closed, the write fails and it ends.
            reader = getattr(getattr(self.pool, "_call_queue", None), "_reader", None)
            if reader is not None:
                with contextlib.suppress(OSError):
                    reader.close()

    def _pool(self):
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_die_with_parent, initargs=(os.getpid(),)
            )
        return self.pool

    def run(self, pairs, finish):
        """Calls ``finish(key, item, result)`` for each ``(key, item)`` of ``pairs``, in order."""
        if self.workers == 0:
            for key, item in pairs:
                finish(key, item, encode_item(item, self.settings))
            return
        pool = self._pool()
        queue = collections.deque()
        try:
            for key, item in pairs:
                starts = len(_worker_processes(pool)) < self.workers  # this submit may start a worker
                with _sigint_held() if starts else contextlib.nullcontext():
                    future = pool.submit(encode_item, item, self.settings)
                queue.append((key, item, future))
                while len(queue) >= self.workers * _IN_FLIGHT_PER_WORKER or (queue and queue[0][2].done()):
                    k, done_item, future = queue.popleft()
                    finish(k, done_item, future.result())
            while queue:
                k, done_item, future = queue.popleft()
                finish(k, done_item, future.result())
        except BaseException:
            for *_, future in queue:
                future.cancel()
            self._stopping()
            raise


def _estimate_bytes_per_image(source, total, encoder):
    """Mean output bytes of up to 16 images spread evenly over the source (deterministic)."""
    k = min(_ESTIMATE_IMAGES, total)
    picks = sorted({(2 * j + 1) * total // (2 * k) for j in range(k)})
    sizes = []

    def finish(_, item, result):
        if result[0] == "ok":  # the per-image mp4 exactly as the writer stores it
            sizes.append(len(build_image_mp4(result[1], result[2], item.target, item.filename).data))

    encoder.run(((i, next(iter(_items_at(source, [i])))) for i in picks), finish)
    if not sizes:
        raise ConversionError(f"none of the {len(picks)} images sampled to estimate the shard size decodes")
    return sum(sizes) / len(sizes)


def convert(
    source,
    output,
    *,
    encoding=None,
    workers=None,
    order="shuffle",
    seed=DEFAULT_SEED,
    num_shards=None,
    shard_size=None,
    shards=None,
    worker_index=None,
    num_workers=None,
    overwrite=False,
    missing_label=None,
    negative_labels="error",
    on_error="raise",
    class_names=None,
    progress=True,
    log=sys.stderr,
) -> ConversionSummary:
    """Converts a source of images into one .bzna file or a set of shards.

    Each image is decoded, padded (right/bottom edge smear) and encoded as one
    full-range BT.601 4:2:0 H.265 picture, with a thumbnail when it exceeds
    512 on a side (SPEC section 2), as ``encoding`` says.

    The images are written in a shuffled order by default: a permutation drawn
    from ``seed`` (recorded in each file's metadata), the same on every rerun
    and every host, so that every shard and every slice of the result (a
    split such as ``"[80%:]"``) is a random sample of the whole, as TFDS
    shuffles when it writes (not stratified: a small shard or slice can miss
    a class). ``order="source"`` keeps the source's order (class by class for a
    folder). Shard k holds positions ``[k N // S, (k+1) N // S)`` of the order.

    Args:
      source: a :class:`~bzna_tf.convert.TFRecordSource`, :class:`~bzna_tf.convert.ImageFolderSource`,
        :class:`~bzna_tf.convert.GulpSource`, :class:`~bzna_tf.convert.WebDatasetSource`,
        :class:`~bzna_tf.convert.ParquetSource`, :class:`~bzna_tf.convert.TFDSSource`,
        :class:`~bzna_tf.convert.HFSource` (any :class:`~bzna_tf.convert.sources.Source`), a list
        of :class:`~bzna_tf.convert.Item`, or an iterable of them (``order="source"``, one file;
        only sources can be resumed).
      output: the .bzna file to write; with shards, the name they derive from:
        ``DIR/NAME.bzna`` -> ``DIR/NAME-00000-of-0000N.bzna`` ... (``~`` is expanded; DIR is created).
      encoding: an :class:`EncodeOptions` (quality, crf, preset, chroma, layout, thumbnails_only,
        encoder, lenient, exif_transpose, alpha_background, max_pixels, max_image_bytes); default
        ``EncodeOptions()``, the "training" quality.
      workers: encoding processes; default all usable cores; 0 encodes in this process. Each
        picture is encoded by one x265 thread either way, so the bytes never depend on ``workers``.
      order: "shuffle" (default) or "source".
      seed: the shuffle's seed, an integer in [0, 2**64) (default 0).
      num_shards: write this many shards.
      shard_size: or shards of about this many bytes (the count is estimated from 16 images
        spread over the source, so it is the same in every process and on every rerun).
      shards: convert only these shard numbers of the plan (an array job's task, a Beam worker).
      worker_index, num_workers: convert only shards ``worker_index``, ``worker_index + num_workers``,
        ... (a SLURM array: ``worker_index=$SLURM_ARRAY_TASK_ID``).
      overwrite: replace existing outputs. Without it, an output that this very conversion already
        finished (same sources, options, order, seed and plan) is skipped, and any other existing
        file is refused, as is one that another process writes under an output name meanwhile.
      missing_label: the target stored for an unlabelled image that is followed by labelled ones
        (the format stores targets for a prefix of each file's samples, so unlabelled images must
        come last unless this is given): a negative number, e.g. -1 (0 or more would be a class).
      negative_labels: "error" (default): a negative label (after a TFRecord source's
        ``label_offset``) stops the conversion, naming the file and record; "unlabelled": such
        images are stored as unlabelled (TFDS writes -1 for images without a label).
      on_error: what a bad record does: one the source cannot read (a truncated tar member, a
        sample without an image, a Parquet row whose image is null, a label that is not an
        integer, a label that is missing without the source's ``allow_unlabelled``, a file name
        that is not UTF-8, an encoded image over ``encoding.max_image_bytes``, refused unread) or an
        image that cannot be decoded (HTML saved as .jpg, a truncated JPEG without
        ``encoding.lenient``, a picture over ``encoding.max_pixels`` or too large for x265).
        "raise" (default) stops the conversion with a message naming the file and the key, row or
        record (one the source knows before reading, before any work); "skip" leaves it out, reports
        it on ``log`` and counts it in the summary (``skipped``) and in the shard's metadata.
      class_names: the class names, indexed by target; default the source's (folder names, TFDS's
        ``LABEL.labels.txt``, TFRecords' ``image/class/text``, GulpIO string labels, a Parquet or
        Hugging Face ``ClassLabel``'s names). A source that
        defines its classes (folders, GulpIO string labels) needs exactly one name per class; a
        target past the last name stops the conversion, and so does an item's ``class_name``
        (TFRecords' ``image/class/text``) that these names, or another item of its target, contradict.
      progress: the progress on ``log``: True or "auto" (default) a bar (images/s, time left) on a
        terminal, elsewhere (a file, a pipe) plain lines, at least one a minute
        (:mod:`bzna_tf.format.progress`); "bar" or "lines" either one wherever ``log`` goes; False
        or "none" nothing.
      log: where the progress and skip reports go.

    Returns:
      A :class:`ConversionSummary`.

    Raises:
      ConversionError: a record the source cannot read or an image that cannot be decoded
        (``on_error="raise"``), a negative label or one past the class names, an item's class name
        that the class names or another item contradict, an existing output
        without ``overwrite``, or NVENC unavailable.
      ConversionInterrupted: Ctrl-C (a ``KeyboardInterrupt``): finished files are kept, the
        unfinished one is removed, and the same call converts the rest.
      SourceError, TFRecordError: a source that cannot be read (nothing is left under ``output``).
      ValueError: bad arguments, or an unlabelled image followed by a labelled one without
        ``missing_label``.
      TypeError: a path as ``source`` (the message names the source to use).
    """
    _check_source(source)
    encoding = _check_arguments(
        encoding, workers, missing_label, negative_labels, order, seed, num_shards, shard_size, on_error
    )
    progress_mode(progress, sys.stderr if log is None else log)  # a bad value is refused before any work
    settings = encoding.settings
    workers = default_workers() if workers is None else workers
    output = os.path.expanduser(os.fspath(output))
    start_time = time.perf_counter()
    try:
        total = len(source)
    except TypeError:
        total = None
    if total is None and (num_shards or shard_size or shards or worker_index is not None):
        raise ValueError("shards need a source with len() (a bzna_tf.convert Source, or a list)")
    if total is None and order == "shuffle":
        raise ValueError(
            "Expected order='source' for a source without len() (an iterator cannot be shuffled; a list "
            "or a bzna_tf.convert source can). Received: order='shuffle'"
        )
    if order == "shuffle" and not getattr(source, "random_access", True):
        raise ValueError(
            f"Expected order='source' (--order source): {source.why_sequential}, so they cannot be read in "
            "a shuffled order (decompress them first to shuffle). Received: order='shuffle'"
        )
    if total == 0:
        raise ConversionError(f"the source holds no image: {output} was not written")
    names = _class_names(source, class_names)
    check_output = getattr(source, "check_output", None)  # a folder's held-out split beside its training file
    if check_output is not None:
        check_output(output, names)
    if on_error == "raise":
        _check_missing_labels(source)
        _check_bad_records(source)
    shard_paths(output, None)  # a file name, not a folder
    make_parent(output)  # the folder is made (or refused) before any work
    summary = ConversionSummary(
        output=output, order=order, seed=int(seed) if order == "shuffle" else None,
        notes=list(getattr(source, "notes", ())), exif_transpose=encoding.exif_transpose,
        alpha_background=encoding.alpha_background,
    )  # fmt: skip
    writer = None
    todo = None  # the shards to write, once known
    try:
        with _Encoder(workers, settings) as enc:
            if shard_size is not None:
                num_shards = shards_for_size(total, _estimate_bytes_per_image(source, total, enc), shard_size)
            plan = plan_shards(total if total is not None else 0, output, num_shards)
            if total is None:  # a plain iterable: one file, its range unknown
                plan = [ShardSpec(0, 1, 0, -1, plan[0].path)]
            summary.num_shards = len(plan)
            mine = _selected(plan, shards, worker_index, num_workers)
            if not mine:  # an array task past the plan's shards: said, not refused (siblings convert them)
                summary.idle = _idle_task(plan, worker_index, num_workers, shard_size)
            positions = None
            if total is not None:
                labelled = source.labelled() if hasattr(source, "labelled") else None
                negatives_too = negative_labels == "unlabelled" and hasattr(source, "negative_labels")
                if labelled is not None and negatives_too:
                    negative = source.negative_labels()  # unlabelled too, so after the labelled ones
                    if negative is not None:
                        labelled = labelled & ~negative
                if order == "source" and missing_label is not None:
                    # Unlabelled images get a target: the source's order stays as it is.
                    labelled = None
                positions = conversion_order(total, order, seed, labelled)
            # A source order with the unlabelled images moved last is another conversion than the plain
            # source order (which earlier versions wrote, shard by shard): its shards must not mix.
            moved = order == "source" and positions is not None and np.any(positions != np.arange(total))
            extra = {"unlabelled_last": True} if moved else {}
            fp = fingerprint(source, encoding, missing_label=missing_label, negative_labels=negative_labels,
                             total=total, num_shards=len(plan), order=order, seed=summary.seed,
                             class_names=class_names, **extra)  # fmt: skip
            # The order and seed are compared as such (_check_siblings says which differs).
            sibling_fp = fingerprint(source, encoding, mtimes=False, missing_label=missing_label,
                                     negative_labels=negative_labels, total=total, num_shards=len(plan),
                                     class_names=class_names, **extra)  # fmt: skip
            # The same without the count of shards: what readers compare between datasets (a file and its
            # conversion again into shards hold the same images; positions tell pieces of one order apart).
            source_fp = fingerprint(source, encoding, mtimes=False, missing_label=missing_label,
                                    negative_labels=negative_labels, total=total, class_names=class_names,
                                    **extra)  # fmt: skip
            _check_siblings(plan, mine, sibling_fp, order, seed, overwrite, summary)
            replaceable = set()
            todo = _triage(mine, fp, order, seed, overwrite, summary, settings["lenient"], on_error,
                           settings["max_pixels"], settings["max_image_bytes"], replaceable=replaceable,
                           changed=lambda: _changed_images(source, plan))  # fmt: skip
            if not todo:
                summary.seconds = time.perf_counter() - start_time
                return summary
            labels = _Labels(
                names, negative_labels, on_error, int(getattr(source, "label_offset", 0) or 0),
                takes_offset="label_offset" in getattr(source, "cli_options", ()),
                names_from="--class-names (class_names=)" if class_names is not None else getattr(
                    source, "class_names_from", None),
                text_key=getattr(source, "class_text_key", None),
            )  # fmt: skip
            writer = _ShardWriter(summary, fp, order, seed, names, missing_label, on_error, log, settings,
                                  sibling_fp, source_fp)  # fmt: skip
            # Any file found at a shard's name when it closes that _triage did not find was written
            # meanwhile by another process: it is kept (_ShardWriter.close).
            writer.replaceable = replaceable
            pairs = ((spec, labels.check(item)) for spec in todo for item in _items(source, positions, spec))
            with _progress_bar(progress, todo, total, log) as writer.bar:
                try:
                    enc.run(pairs, writer.finish)
                    writer.close()
                except BaseException:
                    writer.abort()
                    raise
    except KeyboardInterrupt:
        done = set(summary.written) | {p for p, _ in summary.finished}
        remaining = sum(spec.path not in done for spec in todo) if todo is not None else None
        removed = writer.removed if writer is not None else None
        raise ConversionInterrupted(summary, removed, remaining) from None
    except BrokenProcessPool:  # a worker killed (by the kernel's out-of-memory killer, say)
        raise ConversionError(
            "a worker process died (killed, or out of memory? fewer --processes take less memory; in a "
            'script, is convert() under `if __name__ == "__main__":`? the workers are spawned processes '
            "that import the script); the shard it worked on is not written"
            f"{_what_is_kept(summary, 'run the same command again')}"
        ) from None
    except OSError as e:
        if e.errno is None or e.filename not in {spec.partial for spec in todo or ()}:
            raise
        raise OSError(e.errno, e.strerror + _what_is_kept(summary), e.filename) from e
    summary.seconds = time.perf_counter() - start_time
    summary.targets = None if writer.low is None else (writer.low, writer.high)
    summary.class_names = writer.stored_names
    return summary


def _what_is_kept(summary, again="run the same command again once it can be written") -> str:
    """After a conversion that stopped (by default: an output that could not be written): the shards
    kept, and how to go on (``again``)."""
    if summary.num_shards <= 1:
        return f"; {again}"
    kept = len(summary.written) + len(summary.finished)
    return f"; {kept} of {summary.num_shards} shards are finished and kept: {again} (they are skipped)"


class _NoBar:
    """The progress bar's place when there is none."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _progress_bar(progress, todo, total, log):
    """A tqdm bar over the images of ``todo`` on ``log`` (a context manager), or one giving None.

    ``progress`` as :func:`~bzna_tf.format.progress.progress_mode` reads it: by default a bar where
    ``log`` is a terminal, plain periodic lines elsewhere (:mod:`bzna_tf.format.progress`).
    """
    stream = sys.stderr if log is None else log  # as tqdm's file=None
    mode = progress_mode(progress, stream)
    if mode == "none" or not todo:
        return _NoBar()
    images = sum(len(s) for s in todo) if total is not None else None
    if mode == "lines":
        return PlainProgress(images, stream)
    from tqdm import tqdm

    return tqdm(total=images, unit="img", file=log, dynamic_ncols=True, smoothing=0.05)


def _class_names(source, class_names):
    """The class names to store: given or the source's; a given list must have one per class of the source."""
    if class_names is None:
        names = getattr(source, "class_names", None)
        return list(names) if names is not None else None
    if isinstance(class_names, (str, bytes)) or not all(isinstance(n, str) for n in class_names):
        raise TypeError(f"Expected `class_names` as a list of strings. Received: class_names={class_names!r}")
    names = list(class_names)
    defined = getattr(source, "num_classes", None)
    if defined is not None and len(names) != defined:
        own = getattr(source, "class_names", None) or []
        raise ValueError(
            f"Expected {count(defined, 'class name')}, one per class of the source ({few(own)}). Received: "
            f"{count(len(names), 'name')} in class_names (--class-names): {few(names)}"
        )
    return names


def _check_missing_labels(source):
    """Stops before any work at the first image whose label is missing, when the source knows them up front.

    Else the conversion would stop wherever the shuffled order puts that image, maybe hours in.
    """
    missing = source.missing_labels() if hasattr(source, "missing_labels") else None
    if missing is None or not len(missing):
        return
    item = next(iter(_items_at(source, [int(missing[0])])))
    if item.error is None:  # the source's two answers disagree: let the conversion find it
        return
    more = f" ({count(len(missing), 'image')} in all have no label)" if len(missing) > 1 else ""
    raise ConversionError(f"{item.origin or item.filename}: {item.error}{more}; {_SKIP_HINT}")


def _check_bad_records(source):
    """Stops before any work at the first image the source knows it cannot give (``bad_records()``).

    Else the conversion would stop wherever the order puts it, maybe hours in.
    """
    bad = source.bad_records() if hasattr(source, "bad_records") else None
    if bad is None or not len(bad):
        return
    first, *others = _items_at(source, [int(i) for i in bad[:3]])
    if first.error is None:  # the source's two answers disagree: let the conversion find it
        return
    more = ""
    if others:
        shown = ", ".join(item.origin or item.filename for item in others)
        more = f" ({count(len(bad), 'image')} in all: this one, {shown}{', ...' if len(bad) > 3 else ''})"
    raise ConversionError(f"{first.origin or first.filename}: {first.error}{more}; {_SKIP_HINT}")


def _printable(item):
    """The item with an origin that prints and stores as UTF-8; a file name that cannot be stored
    (UTF-8, in a .bzna file) makes it a bad record: a tar member's name whose bytes are not UTF-8, say."""
    origin = escaped_name(item.origin) if isinstance(item.origin, str) else item.origin
    name = item.filename
    if item.error is None and isinstance(name, str) and escaped_name(name) is not name:
        return dataclasses.replace(item, filename=escaped_name(name), origin=origin, error=NAME_NOT_UTF8)
    return item if origin is item.origin else dataclasses.replace(item, origin=origin)


class _Labels:
    """Checks each item's label before it is encoded: negative ones, ones past the class names, and the
    class name an item gives (TFRecords' ``image/class/text``), which must be the one of every other item
    of its target and the one the class names give, if any.

    ``names_from``: where ``names`` come from, for messages (``"--class-names (class_names=)"``, a names
    file); ``text_key``: the source's feature of class names (``"image/class/text"``), or None;
    ``takes_offset``: whether the source takes --label-offset (a hint may name it).
    """

    def __init__(self, names, negative_labels, on_error="raise", offset=0, takes_offset=False,
                 names_from=None, text_key=None):  # fmt: skip
        self.names, self.negative, self.on_error = names, negative_labels, on_error
        self.offset = offset  # the source's label offset (TFRecords' --label-offset), for the messages
        self.takes_offset = takes_offset  # whether the source takes --label-offset (a hint may name it)
        self.names_from = names_from or "the source's class names"
        self.text_key = text_key
        self.texts = {}  # target -> (the class name the first item of it gave, that item's origin)

    def check(self, item):
        if getattr(item, "error", None) is not None:
            if self.on_error == "raise":
                raise ConversionError(f"{item.origin or item.filename}: {item.error}; {_SKIP_HINT}")
            return item  # skipped by the encoder, counted by the writer
        t = item.target
        if t is None:
            return item
        if not -(1 << 63) <= t < 1 << 63:  # the writer's int64 targets: a bad record, skippable
            error = f"label {t} does not fit in a .bzna target (a signed 64-bit integer)"
            if self.on_error == "raise":
                raise ConversionError(f"{item.origin or item.filename}: {error}; {_SKIP_HINT}")
            return dataclasses.replace(item, target=None, error=error)
        if t < 0:
            if self.negative == "unlabelled":
                return dataclasses.replace(
                    item, target=None, unlabelled="with a negative label (--negative-labels unlabelled)"
                )
            if self.offset:  # the offset made it negative: that is the likelier mistake
                raise ConversionError(
                    f"{item.origin or item.filename}: label {t} is negative: the record's {t - self.offset} "
                    f"plus --label-offset {self.offset}. Check --label-offset (TFDS's labels start at 0: "
                    "they need none); if negative labels mark images without a label, pass "
                    "--negative-labels unlabelled (negative_labels='unlabelled')"
                )
            shifted = (
                "fix --label-offset"
                if self.takes_offset
                else "rewrite them to start at 0 (--label-offset is for tfrecord sources only)"
            )
            raise ConversionError(
                f"{item.origin or item.filename}: label {t} is negative. If negative labels mark images "
                "without a label (TFDS writes -1 for them), pass --negative-labels unlabelled "
                f"(negative_labels='unlabelled'); if the labels are shifted, {shifted}"
            )
        if self.names is not None and t >= len(self.names):
            raise ConversionError(
                f"{item.origin or item.filename}: label {t}, but the class names stop at "
                f"{len(self.names) - 1} ({count(len(self.names), 'name')}: {few(self.names)}): give one name "
                "per class (--class-names FILE, class_names=)"
            )
        if getattr(item, "class_name", None) is not None:
            self._check_class_name(item, t)
        return item

    def _check_class_name(self, item, t):
        """Refuses a class name that another item of target ``t``, or the class names, contradict.

        Not a bad record to skip: which name is right is the user's to say, and the first one seen would
        otherwise name the class (in each shard its own first one).
        """
        name, origin = item.class_name, item.origin or item.filename
        if self.text_key:
            said = f"its {self.text_key!r}"
            without = f"--class-text-key '' (class_text_key=None) to leave the records' {self.text_key!r} out"
        else:
            said = "its class_name"
            without = "items without class_name"
        given = self.names[t] if self.names is not None else None
        if given is not None:
            if name != given:
                raise ConversionError(
                    f"{origin}: the record names class {t} {name!r} ({said}), but {self.names_from} names it "
                    f"{given!r}. Correct whichever is wrong, or give {without} and store these names"
                )
            return
        first_name, first_origin = self.texts.setdefault(t, (name, origin))
        if first_name != name:
            raise ConversionError(
                f"{origin}: the record names class {t} {name!r} ({said}), but {first_origin} names it "
                f"{first_name!r}: the records disagree on the class's name. Give the names with "
                f"--class-names FILE (class_names=; one per line, by target) and {without}"
            )


def _items_at(source, indices):
    """The items at ``indices`` of a source (its ``items``) or of a list of items (indexing)."""
    if hasattr(source, "items"):
        return map(_printable, source.items(indices))
    return (_printable(source[int(i)]) for i in indices)


def _items(source, positions, spec):
    if spec.stop < 0:
        return map(_printable, iter(source))
    return _items_at(source, positions[spec.start : spec.stop])


# A process's reads of other shards' facts, by file identity: a Beam worker converts many shards of
# one set, one call each, and would otherwise read every other shard again for each.
_SIBLING_FACTS: dict = {}


def _sibling_facts(path):
    """:func:`shard_facts`'s facts of ``path``, read once per process while the file stays the same."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    known = _SIBLING_FACTS.get(path)
    if known is None or known[0] != key:
        known = _SIBLING_FACTS[path] = (key, shard_facts(path)[0])
    return known[1]


def _check_siblings(plan, mine, sibling_fp, order, seed, overwrite, summary):
    """Refuses to add shards to a set whose other shards (another task's) another conversion wrote.

    Each task of an array job writes its own shards; one that ran with other sources (changed in
    between), options, order or seed would make a set in which images are missing and others stored
    twice, which no reader can tell. The sources are compared by ``sibling_fp``, the fingerprint
    without the files' mtimes (tasks often read their own copy of the data, made without ``-p``);
    shards written before it was recorded are compared by plan, order and seed only. With
    ``overwrite``, a note instead (the other tasks are to be rerun with it too).
    """
    ours = {spec.index for spec in mine}
    others = []
    for spec in plan:
        if spec.index in ours or spec.stop < 0:
            continue
        try:
            facts = _sibling_facts(spec.path)
        except (BznaFormatError, OSError):
            continue  # missing, or not a finished shard: its own task converts it again
        if not isinstance(facts, dict):
            continue  # not a conversion's: refused when its task runs
        want = conversion_facts(spec, None, order, seed)
        differs = [
            f"{key} {facts.get(key)!r}, now {want[key]!r}"
            for key in ("order", "seed", "num_shards", "start", "stop")
            if facts.get(key) != want[key]
        ]
        theirs = facts.get("sibling_fingerprint")
        if sibling_fp is not None and theirs is not None and theirs != sibling_fp:
            differs.append("other sources (names or sizes) or options")
        if differs:
            others.append(f"{spec.path}: written by a conversion with {', '.join(differs)}")
    if not others:
        return
    more = f" (and {len(others) - 2} more)" if len(others) > 2 else ""
    if overwrite:
        was = "was" if len(others) == 1 else "were"
        summary.notes.append(
            f"warning: {count(len(others), 'other shard')} of this set {was} written by another conversion "
            f"({'; '.join(others[:2])}{more}): rerun their tasks with --overwrite too, or the set mixes two "
            "conversions"
        )
        return
    raise ConversionError(
        f"the other shards of this set were written by another conversion ({'; '.join(others[:2])}{more}): "
        "every task of an array job must run the same command on the same sources (a changed source, "
        "seed, order or option would leave images missing and others stored twice). Run this task as "
        "the others ran, or convert the whole set again (--overwrite in every task)"
    )


_OTHER_SOURCES = "written by a conversion with other sources or options"


def _changed_images(source, plan) -> str:
    """How the images ``source`` lists differ from those stored in the plan's existing files, by name
    (": 1 image added since (a/new.jpg), 1 gone (b/2.jpg)"), for the refusal of files written from other
    sources; "" where the source does not list its images' names without reading them."""
    listing = getattr(source, "stored_names", None)
    now = listing() if listing is not None else None
    if now is None:
        return ""
    stored, complete = set(), True
    root = getattr(source, "root", None)  # images left out (on_error="skip") are named by path under it
    for spec in plan:
        if not os.path.exists(spec.path):
            complete = False
            continue
        try:
            with BznaFile(spec.path) as f:
                stored.update(f.filenames())
                skipped = (f.metadata.get("conversion") or {}).get("skipped") or []
        except (BznaFormatError, OSError, ValueError):
            return ""
        # Images left out (on_error="skip") were in the source then: by their names under its root.
        for entry in skipped if root is not None else ():
            if isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str):
                stored.add(os.path.relpath(entry[0], root).replace(os.sep, "/"))
    now = set(now)
    gone = sorted(stored - now)
    added = sorted(now - stored) if complete else []  # a missing shard's images are not "added"

    def few(names):
        return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")

    parts = []
    if added:
        parts.append(f"{count(len(added), 'image')} added since ({few(added)})")
    if gone:
        parts.append(f"{count(len(gone), 'image')} gone ({few(gone)})")
    if parts:
        return ". The source's images by name: " + ", ".join(parts)
    if complete:
        return (
            ". The source holds the same images by name: their sizes, dates or labels, or the options, "
            "changed since"
        )
    return ""


def _not_a_bzna(path) -> str | None:
    """Why the file at ``path`` is no .bzna file (a TFRecord, a tar, an image, text), or None: no file, an
    empty one, or one that starts as a .bzna (complete or not) does."""
    head = read_head(path)
    if not head or not_bzna_reason(head) is None:
        return None
    return sniff(head) or f"a file that starts with '{printable(head[:8])}'"


def _triage(mine, fp, order, seed, overwrite, summary, lenient=False, on_error="raise",
            max_pixels=DEFAULT_MAX_PIXELS, max_image_bytes=DEFAULT_MAX_IMAGE_BYTES,
            changed=None, replaceable=None):  # fmt: skip
    """The shards to convert; finished ones go to ``summary.finished``; other existing files are refused.

    ``changed``: a function saying how the source's images differ from those the existing files hold,
    for a refusal of files written from other sources ("" where it cannot say). ``replaceable``: a set
    that receives the paths of the shards to convert whose existing file may be replaced (all of them
    with ``overwrite``; else those found here and converted again); the others were absent.

    A finished shard that does not fit ``lenient`` is converted again (it was written without it and
    left images out that it may keep, or with it and may hold repaired pictures), as is one that does
    not fit ``max_pixels`` (:func:`_max_pixels_change`) and one that left images out for their size
    under a smaller ``max_image_bytes``; one that left images out is refused with ``on_error="raise"``,
    which would have stopped there.
    """
    todo, refused, left_out, kept_out, absent = [], [], [], 0, set()
    foreign = [f"{spec.path}: {what}" for spec in mine if (what := _not_a_bzna(spec.path))]
    if foreign:
        more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
        raise ConversionError(
            "refusing to write over files that are not .bzna files, --overwrite or not: "
            f"{'; '.join(foreign[:3])}{more}. Is the output one of the sources (a shell pattern such as "
            "data/train-* left unquoted, its last file taken as the output)? Give the output a .bzna path "
            "of its own; if that file is a damaged output of an earlier run (no .bzna header left), delete "
            "it first"
        )
    for spec in mine:
        done, why, facts = finished(spec, fp, order, seed) if spec.stop >= 0 else (False, "", None)
        if overwrite or not os.path.lexists(spec.path):
            todo.append(spec)
            if not overwrite:
                absent.add(spec.path)
            continue
        if not os.path.exists(spec.path):  # a symbolic link that leads nowhere: a name taken all the same
            target = os.readlink(spec.path)
            refused.append(f"{spec.path}: a symbolic link to {target!r}, which does not exist")
            continue
        if not done:
            refused.append(f"{spec.path}: {why or 'exists'}")
            continue
        skipped = facts.get("skipped", [])
        was_lenient = facts.get("lenient") is True
        if was_lenient != lenient and (was_lenient or skipped):
            todo.append(spec)
            why = (
                "it was converted with --lenient, so it may hold pictures the decoder repaired"
                if was_lenient
                else f"it was converted without --lenient and left out {count(len(skipped), 'image')} that "
                "--lenient may keep"
            )
            summary.notes.append(f"converting {os.path.basename(spec.path)} again: {why}")
        elif (why := _max_pixels_change(facts.get("max_pixels"), max_pixels)) or (
            why := _decoding_change(facts.get("pictures"), skipped, facts.get("decoder"))
        ):
            todo.append(spec)
            summary.notes.append(f"converting {os.path.basename(spec.path)} again: {why}")
        elif facts.get("max_image_bytes", max_image_bytes) < max_image_bytes:
            todo.append(spec)
            summary.notes.append(
                f"converting {os.path.basename(spec.path)} again: it left out images over the "
                f"--max-image-bytes limit it was converted with ({facts['max_image_bytes']:,} bytes), which "
                f"this run's larger one ({max_image_bytes:,} bytes) may take"
            )
        elif skipped and on_error == "raise":
            origin, reason = skipped[0]
            more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
            left_out.append(f"{spec.path} left out {origin} ({reason}){more}")
        else:
            summary.finished.append((spec.path, len(spec) - len(skipped)))
            kept_out += len(skipped)
    if replaceable is not None:
        replaceable.update(spec.path for spec in todo if spec.path not in absent)
    if refused:
        more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
        since = changed() if changed is not None and any(_OTHER_SOURCES in r for r in refused) else ""
        raise ConversionError(
            "refusing to replace existing files that this conversion did not finish; pass --overwrite "
            f"(overwrite=True) to replace them: {'; '.join(refused[:3])}{more}{since}"
        )
    if left_out:
        more = f" (and {len(left_out) - 3} more files)" if len(left_out) > 3 else ""
        raise ConversionError(
            "finished by a conversion with --on-error skip, which left out images that this one would stop "
            f"at: {'; '.join(left_out[:3])}{more}. Pass --on-error skip (on_error='skip') to keep these "
            "files as they are, or --overwrite (overwrite=True) to convert them again"
        )
    if kept_out:
        summary.notes.append(
            f"the files already converted left out {count(kept_out, 'image')} that could not be read or "
            "decoded (bzna-tf info FILE lists them)"
        )
    return todo


# The revision of how pictures are decoded, in each shard's conversion facts ("decoder"). A shard written
# by an earlier one is converted again when it holds pictures that the changes since decode otherwise.
DECODER_REVISION = 2


def _decoding_change(pictures, skipped, decoder=None) -> str:
    """Why a finished shard written by an earlier decoder revision must be converted again; "" when its
    pictures decode the same today.

    ``decoder``: the revision in its facts. Before revisions were recorded, the first version is told
    from the second by its ``pictures`` facts (they lack ``tiff_orientation``). Revision 0 stored TIFFs
    with an orientation tag as their raster lies, reduced 16-bit pictures by FFmpeg's dithering and
    refused PNGs with some text chunks; revisions 0 and 1 stored YCCK JPEGs whose components are named
    C, M, Y, K as CMYK (wrong colours). Shards of two revisions in one set would hold pictures decoded
    two ways.
    """
    if not isinstance(pictures, dict):
        return ""
    if decoder is None:
        decoder = 1 if "tiff_orientation" in pictures else 0
    if not isinstance(decoder, int) or decoder >= DECODER_REVISION:
        return ""
    changes = [  # (the last revision that decoded them otherwise, what, how many)
        (0, "with an orientation (a TIFF's is now applied)", pictures.get("exif_orientation", 0)),
        (
            0,
            "of more than 8 bits per channel (now reduced by their high byte)",
            pictures.get("high_bit_depth", 0),
        ),
        (0, "of PNG data it could not decode (some now decode)", sum("PNG data of" in r for _, r in skipped)),
        (1, "in CMYK (a YCCK JPEG's colours are now kept)", pictures.get("cmyk", 0)),
    ]
    changed = [f"{count(k, 'picture')} {what}" for since, what, k in changes if since >= decoder and k]
    if not changed:
        return ""
    return f"an earlier bzna_tf converted it, and may have decoded its {' and '.join(changed)} otherwise"


def _max_pixels_change(recorded, max_pixels) -> str:
    """Why a finished shard must be converted again under ``max_pixels``; "" when it is what this run writes.

    ``recorded``: its conversion facts' ``{"limit", "largest", "over"}`` (the limit, the largest picture
    it holds, the pictures it left out for being over the limit). A shard written before the limit
    existed has none, and is kept: every picture it holds was decoded and encoded.
    """
    if not isinstance(recorded, dict):
        return ""
    old, largest, over = recorded.get("limit"), recorded.get("largest", 0), recorded.get("over", 0)
    if over and old is not None and (max_pixels is None or max_pixels > old):
        new = "none" if max_pixels is None else f"{max_pixels:,}"
        return (
            f"it left out {count(over, 'image')} over --max-pixels {old:,} that --max-pixels {new} may keep"
        )
    if max_pixels is not None and largest > max_pixels:
        return f"it holds a picture of {largest:,} pixels, over --max-pixels {max_pixels:,}"
    return ""


class _ShardWriter:
    """Receives encoded images in input order and writes them to their shards, one file at a time."""

    def __init__(self, summary, fp, order, seed, base_names, missing_label, on_error, log, settings,
                 sibling_fp=None, source_fp=None):  # fmt: skip
        self.summary, self.fp, self.missing_label, self.on_error = summary, fp, missing_label, on_error
        self.sibling_fp = sibling_fp  # what the other tasks of an array job compare (_check_siblings)
        self.source_fp = source_fp  # what readers compare between datasets (shards.py)
        self.settings = settings
        self.order, self.seed = order, seed
        self.base_names = list(base_names) if base_names is not None else None
        self.bar, self.log = None, log
        self.spec = self.writer = None
        self.low = self.high = None
        self.stored_names = None
        self.removed = None  # the partial file of an aborted shard
        self.replaceable = set()  # the shards' paths whose existing file this conversion may replace

    def _open(self, spec):
        self.close()
        self.spec = spec
        self.writer = BznaWriter(spec.path, partial=spec.partial, replace=spec.path in self.replaceable)
        self.shard_skipped = []
        self.shard_too_large = 0  # images left out for their size (max_image_bytes)
        self.shard_pictures = dict.fromkeys(PICTURE_FACTS, 0)
        self.shard_pixels = {"limit": self.settings["max_pixels"], "largest": 0, "over": 0}
        self.names = list(self.base_names) if self.base_names is not None else []
        self.first_unlabelled = None

    def finish(self, spec, item, result):
        if spec is not self.spec:
            self._open(spec)
        if result[0] == "skip":
            self.shard_too_large += result[2] == _TOO_LARGE_HINT
            self._skip(item, *result[1:])
        else:
            self._write(item, result)
        if self.bar is not None:  # the count first: the update shows it
            self.bar.set_postfix(skipped=len(self.summary.skipped), refresh=False)
            self.bar.update(1)

    def _skip(self, item, reason, hint, cause=None):
        origin = item.origin or item.filename
        if self.on_error == "raise":
            raise ConversionError(f"{origin}: {reason}; {hint}")
        self.shard_pixels["over"] += cause == "max_pixels"
        self.summary.skipped.append((origin, reason))
        self.shard_skipped.append([origin, reason])
        message = f"skipped {origin}: {reason}"
        if self.bar is not None:
            self.bar.write(message, file=self.log)
        elif self.log is not None:
            print(message, file=self.log)

    def _write(self, item, result):
        _, inp, thumb, facts, pixels = result
        self.shard_pixels["largest"] = max(self.shard_pixels["largest"], pixels)
        for fact in facts:
            self.shard_pictures[fact] += 1
            self.summary.pictures.setdefault(fact, [0, item.origin or item.filename])[0] += 1
        target = item.target
        if target is None and self.missing_label is not None:
            target = self.missing_label
        if target is not None and self.first_unlabelled is not None:
            raise ValueError(
                f"{item.origin}: a labelled image after unlabelled ones ({self.first_unlabelled} first); the "
                "format stores targets for a prefix of each file's samples: put unlabelled images last (a "
                "shuffled order mixes them when the source cannot tell them apart before reading them), or "
                "pass missing_label (--missing-label, e.g. -1) to store a target for them"
            )
        if item.target is None:
            why = item.unlabelled or "without a label"
            seen = self.summary.unlabelled.setdefault(why, [0, item.origin or item.filename])
            seen[0] += 1
        elif target >= 0:
            self.summary.labelled += 1
        if target is None:
            self.first_unlabelled = self.first_unlabelled or item.origin or item.filename
        else:
            self.low = target if self.low is None else min(self.low, target)
            self.high = target if self.high is None else max(self.high, target)
            if item.class_name is not None and 0 <= target < 1 << 20:
                self.names.extend([None] * (target + 1 - len(self.names)))
                if self.names[target] is None:
                    self.names[target] = item.class_name
        self.writer.append(inp, thumb=thumb, target=target, filename=item.filename)
        self.summary.images += 1

    def close(self):
        """Finishes the current shard: its metadata, then the atomic rename."""
        if self.writer is None:
            return
        writer, spec, self.writer = self.writer, self.spec, None
        if not len(writer):
            writer.abort()
            raise ConversionError(
                f"{spec.path}: no image of its range could be converted ({len(self.shard_skipped)} skipped)"
            )
        facts = conversion_facts(spec, self.fp, self.order, self.seed)
        facts["skipped"] = self.shard_skipped
        if self.sibling_fp is not None:
            facts["sibling_fingerprint"] = self.sibling_fp
        if self.source_fp is not None:
            facts["source_fingerprint"] = self.source_fp
        facts["lenient"] = self.settings["lenient"]
        if self.shard_too_large:  # only then: a rerun with a larger limit converts this shard again
            facts["max_image_bytes"] = self.settings["max_image_bytes"]
        # What decoding did to the pictures (bzna-tf info shows it); the options are in the fingerprint too.
        facts["pictures"] = self.shard_pictures
        facts["decoder"] = DECODER_REVISION
        facts["exif_transpose"] = self.settings["exif_transpose"]
        alpha = self.settings["alpha_background"]
        facts["alpha_background"] = list(alpha) if alpha is not None else None
        # The pixel limit is not in the fingerprint: _triage decides from these whether a shard still fits.
        facts["max_pixels"] = self.shard_pixels
        writer.metadata["conversion"] = facts
        if any(n is not None for n in self.names):
            writer.metadata["class_names"] = self.names
            # The summary's names are those of every shard written (a shard names the targets it holds).
            merged = list(self.stored_names or ())
            merged += [None] * (len(self.names) - len(merged))
            for target, name in enumerate(self.names):
                merged[target] = merged[target] if merged[target] is not None else name
            self.stored_names = merged
        try:
            writer.close()
        except FileExistsError:
            raise ConversionError(
                f"{spec.path} appeared while this conversion wrote it (another conversion of the same "
                "output running at the same time?): that file is kept, and this conversion's copy is "
                "removed. Rerun with --overwrite (overwrite=True) to replace it, or let the other "
                "conversion finish and rerun this one to check what it wrote"
            ) from None
        self.summary.written.append(spec.path)
        self.summary.bytes += os.path.getsize(spec.path)

    def abort(self):
        if self.writer is not None:
            self.removed = self.writer.partial_path
            self.writer.abort()
            self.writer = None
