"""A picture of what the model will see: a grid of decoded, augmented samples with their labels."""

from __future__ import annotations

import itertools
import math
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np

from bzna_tf.format.atomic import write_atomic
from bzna_tf.format.wording import count

__all__ = [
    "IMAGE_FORMATS",
    "Preview",
    "PreviewWarning",
    "check_image_path",
    "preview",
    "render_text",
    "write_image",
    "write_png",
]

IMAGE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}
"""The grid's file formats, by suffix (TensorFlow's encoders: no other image library is needed)."""
JPEG_QUALITY = 95
# With on_error="skip": at most this many damaged samples are named one by one.
_NAMED_SKIPS = 10
# ... and at most this many samples are tried in all (a file that is mostly damaged ends the search).
_MAX_TRIES = 256

PAD = 4  # pixels between tiles and around the grid
TEXT_SCALE = 2  # each font pixel is a 2 x 2 block
CAPTION = 5 * TEXT_SCALE + 4  # caption strip under each tile: 5-pixel glyphs + 2 pixels above and below
BACKGROUND = 40
TEXT = 255

# A 3 x 5 pixel font for captions ("index: label"): rows top to bottom, 3 bits each.
_FONT = {
    "0": ("111", "101", "101", "101", "111"),
    "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"),
    "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"),
    "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"),
    "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"),
    "9": ("111", "101", "111", "001", "111"),
    "-": ("000", "000", "111", "000", "000"),
    ":": ("000", "010", "000", "010", "000"),
    " ": ("000", "000", "000", "000", "000"),
    "?": ("111", "001", "011", "000", "010"),
}


def render_text(text: str, scale: int = TEXT_SCALE) -> np.ndarray:
    """``text`` as a boolean bitmap (5 * scale rows; 4 * scale columns per character).

    Digits, ``-``, ``:`` and space; anything else shows as ``?``.
    """
    cols = []
    for ch in text:
        glyph = np.array([[c == "1" for c in row] for row in _FONT.get(ch, _FONT["?"])], bool)
        cols += [glyph, np.zeros((5, 1), bool)]
    bitmap = np.concatenate(cols, axis=1) if cols else np.zeros((5, 0), bool)
    return np.kron(bitmap, np.ones((scale, scale), bool)).astype(bool)


def caption(index: int, label: int) -> str:
    """A tile's caption: ``<global sample index>: <label>`` (``-`` for no label)."""
    return f"{index}: {label if label >= 0 else '-'}"


class PreviewWarning(UserWarning):
    """A preview shows fewer samples than asked for, or left out a damaged sample (``on_error="skip"``)."""


@dataclass
class Preview:
    """A preview grid and where each tile lies in it.

    Attributes:
      image: uint8 (H, W, 3), the grid.
      indices: each tile's global sample index, in tile order (row by row).
      labels: each tile's label (-1: none).
      boxes: each tile's (y, x, height, width) in ``image`` (the picture;
        its caption lies just below, ``CAPTION`` pixels high).
    """

    image: np.ndarray
    indices: list[int]
    labels: list[int]
    boxes: list[tuple[int, int, int, int]]

    def tile(self, i: int) -> np.ndarray:
        y, x, h, w = self.boxes[i]
        return self.image[y : y + h, x : x + w]


def grid_size(n: int, shape, columns: int | None = None) -> tuple[int, int, int, int]:
    """(rows, columns, height, width) of the grid for ``n`` tiles of ``shape`` = (h, w)."""
    cols = columns or math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    h, w = shape
    return rows, cols, rows * (h + CAPTION) + (rows + 1) * PAD, cols * w + (cols + 1) * PAD


def preview(
    data,
    n: int = 16,
    *,
    shape=(128, 128),
    warp=None,
    seed: int = 0,
    shuffle: bool = True,
    training: bool = True,
    columns: int | None = None,
    track: str = "bzna_thumb",
    sample_list=None,
    antialias=None,
    on_error: str = "raise",
) -> Preview:
    """``n`` samples decoded and warped exactly as ``as_dataset`` would, laid out in a grid.

    Args:
      data: a :class:`bzna_tf.Dataset` (any subclass), or paths for a
        :class:`bzna_tf.ClassificationDataset` of ``track``.
      n: how many samples; a dataset with fewer gives all of its samples,
        and a :class:`PreviewWarning` says so.
      shape: each tile's (height, width).
      warp: as for ``as_dataset``: a ``bzna_tf.layers`` warp layer or a
        ``bzna_tf.transforms`` transform (default: the whole picture, centred).
      seed: picks the samples (with ``shuffle``) and draws their warps; the
        same seed gives the same grid, and ``as_dataset(seed=seed, ...)``
        gives these samples the same warps in its first epoch.
      shuffle: ``n`` samples at random; False: the first ``n``.
      training: False shows the warp's deterministic (evaluation) values.
      columns: tiles per row (default: a square grid).
      track: for paths: ``"bzna_thumb"`` (default) or ``"bzna_input"``.
      sample_list: only the samples of this LBANN sample list (a path or a ``SampleList``).
      antialias: as for ``as_dataset``: filter where the warp shrinks the
        picture (default: the warp layer's, or True); False shows Benzina's
        point-sampled warp.
      on_error: a sample that cannot be read or decoded: ``"raise"``
        (default) raises TensorFlow's error, which names the file and the
        sample; ``"skip"`` leaves it out, takes the next sample instead (the
        next at random with ``shuffle``), and names it in a :class:`PreviewWarning`.

    Returns:
      A :class:`Preview`.
    """
    from bzna_tf.datasets import ClassificationDataset, Dataset
    from bzna_tf.datasets.arguments import flag, resolve_seed
    from bzna_tf.datasets.arguments import positive_int as _positive_int
    from bzna_tf.format.samplelist import SampleList

    if on_error not in ("raise", "skip"):
        raise ValueError(f"Expected `on_error` in ('raise', 'skip'). Received: on_error={on_error!r}")
    shuffle = flag(shuffle, "shuffle")
    if seed is not None:
        seed = resolve_seed(seed)[0]  # as as_dataset takes it: an integer, reduced modulo 2**63
    if not isinstance(data, Dataset):
        data = ClassificationDataset(_paths(data), track=track)
    if sample_list is not None:
        data = data.select(SampleList.of(sample_list))
    asked = _positive_int(n, "n")
    n = min(asked, len(data))
    if n < asked:
        what = data._describe_files()
        if getattr(data, "split", None) is not None:
            what += f", split {data.split!r}"
        if sample_list is not None:
            what += ", the samples its sample list selects"
        warnings.warn(
            f"asked for {count(asked, 'sample')}, but the dataset ({what}) has "
            f"{count(n, 'sample')}: the preview shows {'it' if n == 1 else f'all {n}'}",
            PreviewWarning,
            stacklevel=2,
        )
    if columns is not None:
        columns = _positive_int(columns, "columns")
    rng = np.random.default_rng(seed)
    first = rng.choice(len(data), size=n, replace=False) if shuffle else np.arange(n)

    def render(positions):
        chosen = data.select(positions)
        # A preview shows unlabelled samples too (captioned "-"), with training warps.
        reading = chosen._reading_unlabelled("show") if isinstance(chosen, ClassificationDataset) else chosen
        dataset = Dataset.as_dataset(
            reading,
            batch_size=len(positions),
            shape=shape,
            warp=warp,
            seed=seed,
            training=training,
            prefetch=0,
            antialias=antialias,
            data_format="channels_last",  # tiles are (height, width, 3) whatever Keras' setting
        )
        batch = next(iter(dataset))
        images = batch[0] if isinstance(batch, tuple) else batch
        return np.clip(np.rint(np.asarray(images)), 0, 255).astype(np.uint8), chosen

    if on_error == "raise":
        images, chosen = render(first)
    else:
        positions, images = _render_skipping(render, first, _others(rng, len(data), first, shuffle), n, asked)
        if not positions:
            raise ValueError(f"no sample of {data._describe_files()} could be read and decoded")
        images, chosen = np.stack(images), data.select(positions)
        n = len(positions)
    h, w = images.shape[1:3]
    labels = chosen.targets.tolist()
    indices = chosen.indices.tolist()
    rows, cols, height, width = grid_size(n, (h, w), columns)
    grid = np.full((height, width, 3), BACKGROUND, np.uint8)
    boxes = []
    for i in range(n):
        r, c = divmod(i, cols)
        y, x = PAD + r * (h + CAPTION + PAD), PAD + c * (w + PAD)
        grid[y : y + h, x : x + w] = images[i]
        text = render_text(caption(indices[i], labels[i]))[:, :w]
        ty = y + h + (CAPTION - text.shape[0]) // 2
        grid[ty : ty + text.shape[0], x : x + text.shape[1]][text] = TEXT
        boxes.append((y, x, h, w))
    return Preview(grid, indices, labels, boxes)


def _paths(data):
    """``data`` when it is a path or a list of them; a TypeError saying what preview takes, else."""
    import os

    def is_path(p):
        return isinstance(p, (str, os.PathLike))

    if is_path(data) or (isinstance(data, (list, tuple)) and data and all(is_path(p) for p in data)):
        return data
    text = repr(data)
    raise TypeError(
        "Expected `data` as a bzna_tf.Dataset (ClassificationDataset, ImageNet, ...) or .bzna paths: "
        "preview reads and warps the samples itself, as as_dataset would. Pass the dataset you would call "
        "as_dataset on, and give preview the warp, seed and shape (preview(ds, 16, warp=..., seed=...)). "
        f"Received: data={text if len(text) <= 120 else text[:117] + '...'}"
    )


def _others(rng, size, first, shuffle):
    """The positions to try after ``first`` when some of it is damaged (lazily: most previews need none)."""
    rest = np.setdiff1d(np.arange(size), first)
    yield from (rng.permutation(rest) if shuffle else rest)


def _render_skipping(render, first, others, n, asked):
    """(positions, images) of up to ``n`` samples that decode, from ``first`` then ``others``.

    A batch that fails is rendered one sample at a time (each sample's warp
    depends only on its index, so a tile is the same alone or in a batch);
    every sample left out is named in a PreviewWarning.
    """
    import tensorflow as tf

    good, images, bad = [], [], []
    todo = [int(p) for p in first]
    while todo:
        try:
            rendered, chosen = render(todo)
            good += todo
            images += list(rendered)
        except tf.errors.OpError:
            for p in todo:
                try:
                    rendered, chosen = render([p])
                    good.append(p)
                    images.append(rendered[0])
                except tf.errors.OpError as e:
                    bad.append(error_line(e))
        tried = len(good) + len(bad)
        todo = [int(p) for p in itertools.islice(others, max(0, min(n - len(good), _MAX_TRIES - tried)))]
    for reason in bad[:_NAMED_SKIPS]:
        warnings.warn(f"skipped a damaged sample: {reason}", PreviewWarning, stacklevel=3)
    if len(bad) > _NAMED_SKIPS:
        warnings.warn(f"skipped {len(bad) - _NAMED_SKIPS} more damaged samples", PreviewWarning, stacklevel=3)
    if bad and len(good) < min(n, asked):
        warnings.warn(
            f"{count(len(bad), 'damaged sample')} left out: the preview shows {count(len(good), 'sample')}",
            PreviewWarning,
            stacklevel=3,
        )
    return good, images


# What tf.data puts before an op's own message: "{{function_node ...}} Error in user-defined function
# passed to ParallelMapDatasetV2:4 transformation with iterator: Iterator::Root::...: ".
_TF_PREFIX = re.compile(
    r"^(\{\{function_node [^}]*\}\}\s*)?(Error in user-defined function passed to .*? with iterator: \S+: )?"
)


def error_line(error) -> str:
    """A TensorFlow error's own words: its first line, without tf.data's prefixes and the node context.

    ``"bad.bzna, sample 5, byte offset 31381: box 'ftyp' of 4294967295 bytes runs past ..."``.
    """
    message = (getattr(error, "message", None) or str(error)).strip()
    if not message:
        return type(error).__name__
    return _TF_PREFIX.sub("", message.splitlines()[0]).strip()


def check_image_path(path) -> str:
    """``path`` if its suffix names a format of ``IMAGE_FORMATS`` (.png, .jpg, .jpeg), else a ValueError."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in IMAGE_FORMATS:
        raise ValueError(
            f"Expected an image file name ending in {', '.join(IMAGE_FORMATS)} (the suffix chooses the "
            f"format). Received: {os.fspath(path)!r}"
        )
    return os.fspath(path)


def write_image(path, image: np.ndarray) -> str:
    """Writes an (H, W, 3) uint8 image in the format its suffix names (PNG, or JPEG at quality 95).

    Atomic (a temporary file renamed into place); the folder is created when
    missing. Raises ValueError for another suffix, before anything is written.
    """
    import tensorflow as tf

    path = check_image_path(path)
    image = np.ascontiguousarray(image)
    if IMAGE_FORMATS[os.path.splitext(path)[1].lower()] == "JPEG":
        data = tf.io.encode_jpeg(image, quality=JPEG_QUALITY).numpy()
    else:
        data = tf.io.encode_png(image).numpy()
    return write_atomic(path, data)


def write_png(path, image: np.ndarray) -> str:
    """Writes an (H, W, 3) uint8 image as PNG (atomically: a temporary file renamed into place)."""
    import tensorflow as tf

    return write_atomic(path, tf.io.encode_png(np.ascontiguousarray(image)).numpy())
