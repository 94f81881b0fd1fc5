"""The parallel converter: sources -> decode -> H.265 -> one .bzna file.

The main process reads the source and writes the file; N worker processes
(``spawn``ed, so no TensorFlow state is forked) decode each image and encode
it with x265 (one thread each, which scales better than x265's own threads on
single pictures). At most a few images per worker are in flight, so memory
stays flat whatever the dataset's size, and results are written in input
order. An image that cannot be decoded is reported and skipped (``strict``
makes it fatal). The file is written under a temporary name and renamed at
the end: an interrupt never leaves a partial file under the final name.
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field

from bzna_tf.convert.encode import DEFAULT_CRF, DEFAULT_PRESET, encode_image
from bzna_tf.convert.images import ImageDecodeError, decode_image
from bzna_tf.convert.sources import Item
from bzna_tf.format.writer import BznaWriter

__all__ = ["ConversionError", "ConversionSummary", "EncodeOptions", "convert", "default_workers"]

ENCODERS = ("x265", "nvenc")
# Images queued per worker: enough to keep every worker busy while the main
# process writes, few enough that memory does not grow with the dataset.
_IN_FLIGHT_PER_WORKER = 4


class ConversionError(RuntimeError):
    """A conversion that stopped: an undecodable image with ``strict``, or a source error."""


@dataclass(frozen=True)
class EncodeOptions:
    """How each image is encoded (see :func:`convert`)."""

    crf: float = DEFAULT_CRF
    preset: str = DEFAULT_PRESET
    thumbnails_only: bool = False
    encoder: str = "x265"
    lenient: bool = False
    threads: int | None = None


@dataclass
class ConversionSummary:
    """What a conversion did.

    Attributes:
      output: the file written.
      images: samples written.
      skipped: (origin, reason) of every image skipped.
      seconds: wall time.
      bytes: the output's size.
      targets: (smallest, largest) target written, or None.
    """

    output: str
    images: int = 0
    skipped: list = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0
    targets: tuple | None = None

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_image(self) -> float:
        return self.bytes / self.images if self.images else 0.0

    def __str__(self):
        lines = [
            f"wrote {self.output}: {self.images} images, {self.bytes / 1e6:.1f} MB "
            f"({self.bytes_per_image / 1e3:.1f} kB per image) in {self.seconds:.1f} s "
            f"({self.images_per_second:.1f} images/s)"
        ]
        if self.targets is not None:
            lines.append(f"targets {self.targets[0]}..{self.targets[1]}")
            if self.targets == (1, 1000):
                lines.append(
                    "note: targets 1..1000 look like the classic ImageNet TFRecords' 1-based labels; "
                    "convert with label_offset=-1 (--label-offset -1) for 0..999"
                )
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} undecodable images:")
            lines += [f"  {origin}: {reason}" for origin, reason in self.skipped[:20]]
            if len(self.skipped) > 20:
                lines.append(f"  ... and {len(self.skipped) - 20} more")
        return "\n".join(lines)


def default_workers() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _read(item: Item) -> bytes:
    if item.data is not None:
        return item.data
    with open(item.path, "rb") as f:
        return f.read()


def encode_item(item: Item, options: EncodeOptions):
    """Decodes and encodes one image (in a worker): ("ok", input, thumb) or ("skip", reason)."""
    try:
        rgb = decode_image(_read(item), lenient=options.lenient)
    except (ImageDecodeError, OSError) as e:
        return ("skip", str(e))
    if options.encoder == "nvenc":
        from bzna_tf.convert.nvenc import encode_image_nvenc

        inp, thumb = encode_image_nvenc(rgb, qp=options.crf, thumbnails_only=options.thumbnails_only)
    else:
        inp, thumb = encode_image(
            rgb,
            crf=options.crf,
            preset=options.preset,
            threads=options.threads,
            thumbnails_only=options.thumbnails_only,
        )
    return ("ok", inp, thumb)


def _check_options(workers, crf, encoder, missing_label):
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise ValueError(f"Expected `workers` as an integer >= 0. Received: workers={workers!r}")
    if not 0 <= crf <= 51:
        raise ValueError(f"Expected `crf` in [0, 51]. Received: crf={crf!r}")
    if encoder not in ENCODERS:
        raise ValueError(f"Expected `encoder` in {ENCODERS}. Received: encoder={encoder!r}")
    if missing_label is not None and (isinstance(missing_label, bool) or not isinstance(missing_label, int)):
        raise ValueError(
            f"Expected `missing_label` as None or an integer. Received: missing_label={missing_label!r}"
        )
    if encoder == "nvenc":
        from bzna_tf.convert.nvenc import nvenc_error

        reason = nvenc_error()
        if reason:
            raise ConversionError(f"the NVENC encoder is unavailable: {reason}")


def convert(
    source,
    output,
    *,
    workers=None,
    crf=DEFAULT_CRF,
    preset=DEFAULT_PRESET,
    thumbnails_only=False,
    encoder="x265",
    strict=False,
    lenient=False,
    missing_label=None,
    progress=True,
    log=sys.stderr,
) -> ConversionSummary:
    """Converts a source of images into one .bzna file.

    Each image is decoded, padded to multiples of 512 (right/bottom edge
    smear) and encoded as one full-range BT.601 4:2:0 H.265 picture, with a
    512x512-framed thumbnail when it exceeds 512 on a side (SPEC.md section 2).

    Args:
      source: a :class:`~bzna_tf.convert.TFRecordSource`, :class:`~bzna_tf.convert.ImageFolderSource`,
        :class:`~bzna_tf.convert.GulpSource`, or any iterable of :class:`~bzna_tf.convert.Item`
        (with ``len()`` for an ETA).
      output: the .bzna file to write (replaced at the end if it exists).
      workers: encoding processes; default all usable cores; 0 encodes in this process (x265 then
        uses its own threads).
      crf: x265 constant rate factor (default 10, Benzina's; lower is better and bigger); the constant
        QP with NVENC.
      preset: x265 preset, "ultrafast" ... "placebo" (default "medium", Benzina's).
      thumbnails_only: store only the <= 512x512 thumbnails (a much smaller file).
      encoder: "x265" (CPU, default) or "nvenc" (NVIDIA GPU through PyNvVideoCodec).
      strict: stop at the first undecodable image instead of skipping it.
      lenient: keep pictures the decoder had to repair (e.g. a truncated JPEG with a grey bottom).
      missing_label: the target stored for an unlabelled image that is followed by labelled ones
        (the format stores targets for a prefix of the samples, so unlabelled images must come last
        unless this is given, e.g. -1).
      progress: show a progress bar (images/s, ETA) on ``log``.
      log: where the progress bar and skip reports go.

    Returns:
      A :class:`ConversionSummary`.

    Raises:
      ConversionError: an undecodable image with ``strict``, or NVENC unavailable.
      SourceError, TFRecordError: a source that cannot be read (nothing is left under ``output``).
      ValueError: bad arguments, or an unlabelled image followed by a labelled one without
        ``missing_label``.
    """
    _check_options(workers, crf, encoder, missing_label)
    workers = default_workers() if workers is None else workers
    options = EncodeOptions(
        crf=crf,
        preset=preset,
        thumbnails_only=thumbnails_only,
        encoder=encoder,
        lenient=lenient,
        threads=1 if workers > 0 and encoder == "x265" else None,
    )
    start = time.perf_counter()
    summary = ConversionSummary(output=os.fspath(output))
    try:
        total = len(source)
    except TypeError:
        total = None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="img", file=log, dynamic_ncols=True, smoothing=0.05)
    first_unlabelled = None  # origin of the first unlabelled image written
    low = high = None

    def write(writer, item, result):
        nonlocal low, high, first_unlabelled
        if result[0] == "skip":
            summary.skipped.append((item.origin or item.filename, result[1]))
            if strict:
                raise ConversionError(f"{item.origin or item.filename}: {result[1]}")
            message = f"skipped {item.origin or item.filename}: {result[1]}"
            if bar is not None:
                bar.write(message, file=log)
            elif log is not None:
                print(message, file=log)
            return
        _, inp, thumb = result
        target = item.target
        if target is None and missing_label is not None:
            target = missing_label
        if target is not None and first_unlabelled is not None:
            raise ValueError(
                f"{item.origin}: a labelled image after unlabelled ones ({first_unlabelled} first); the "
                "format stores targets for a prefix of the samples: put unlabelled images last, or pass "
                "missing_label (e.g. -1) to store a target for them"
            )
        if target is None:
            first_unlabelled = first_unlabelled or item.origin or item.filename
        else:
            low = target if low is None else min(low, target)
            high = target if high is None else max(high, target)
        writer.append(inp, thumb=thumb, target=target, filename=item.filename)
        summary.images += 1

    try:
        _run(source, output, workers, options, write, bar, summary)
    finally:
        if bar is not None:
            bar.close()
    summary.seconds = time.perf_counter() - start
    summary.bytes = os.path.getsize(output)
    summary.targets = None if low is None else (low, high)
    return summary


def _run(source, output, workers, options, write, bar, summary):
    """Reads, encodes (in workers) and writes, in input order."""
    with BznaWriter(output) as writer:

        def finish(item, result):
            write(writer, item, result)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(skipped=len(summary.skipped), refresh=False)

        if workers == 0:
            for item in source:
                finish(item, encode_item(item, options))
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
                queue = collections.deque()
                try:
                    for item in source:
                        queue.append((item, pool.submit(encode_item, item, options)))
                        while len(queue) >= workers * _IN_FLIGHT_PER_WORKER or (queue and queue[0][1].done()):
                            done_item, future = queue.popleft()
                            finish(done_item, future.result())
                    while queue:
                        done_item, future = queue.popleft()
                        finish(done_item, future.result())
                except BaseException:
                    for _, future in queue:
                        future.cancel()
                    raise
        if summary.images == 0:
            raise ConversionError(f"no image could be converted ({len(summary.skipped)} skipped)")
