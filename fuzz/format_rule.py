"""The rule fuzz/fuzz_format.py (atheris) and tests/test_fuzzing.py (hypothesis) check.

On any bytes, each parser of the pure-Python reader and of sample lists
succeeds or raises the error its contract names (BznaFormatError for .bzna
data, SampleListError for lists): :func:`exercise` runs them all and raises
:class:`Finding` for any other exception. See fuzz/fuzz_format.py.
"""

from __future__ import annotations

import io

import numpy as np

from bzna_tf.format import BznaFile, BznaFormatError, HvcC, SampleList, SampleListError, parse_image_mp4
from bzna_tf.format.hevc import split_nals

# Samples walked per file: the first ones and the last.
SAMPLES_READ = 8
# The made-up data files global_indices resolves a parsed list against.
DATA_PATHS = ("/data/a.bzna", "/data/sub/b.bzna")
DATA_SIZES = (5, 300)
DATA_NAMES = (["x.jpg", "y.jpg", "x.jpg", "z.jpg", "w.jpg"], None)


def _walk_bzna(data: bytes) -> None:
    with BznaFile(io.BytesIO(data), name="fuzz.bzna") as f:
        n = len(f)
        # Properties read for their checks (each parses on first use).
        _ = (f.targets, f.filenames(), f.metadata, f.class_names, f.checksums, f.check_index())
        picks = list(range(min(n, SAMPLES_READ)))
        if n > SAMPLES_READ:
            picks.append(n - 1)
        for i in picks:
            f.target(i)
            f.filename(i)
            try:
                f.thumb_location(i)
            except KeyError:  # documented: the file has no bzna_thumb track
                pass
            try:
                s = f.sample(i, verify=False)
                s.thumb.annexb()
                s.input.annexb()
            except BznaFormatError:
                pass
            f.sample_checksums(i)


def _walk_mp4(data: bytes) -> None:
    img = parse_image_mp4(data)
    img.input.annexb()
    img.thumb.annexb()


def _walk_hvcc(data: bytes) -> None:
    hvcc = HvcC.from_bytes(data)
    _ = hvcc.parameter_sets
    split_nals(data, hvcc.length_size)


# A list is expanded into as many ids as its line 2 announces (the parser checks every line
# against that before expanding): lists announcing more are legitimate and large, not findings.
MAX_ANNOUNCED = 10**6


def _walk_list(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    counts = text.splitlines()[1:2]
    if counts and any(t.isdigit() and int(t) > MAX_ANNOUNCED for t in counts[0].split()):
        return
    sl = SampleList.parse(text, path="/lists/fuzz.txt")
    starts = np.concatenate([[0], np.cumsum(DATA_SIZES)]).astype(np.int64)
    sl.global_indices(DATA_PATHS, starts, lambda k: DATA_NAMES[k])
    sl.to_text()


# (what is exercised, the function, the exceptions its contract allows)
WALKS = (
    ("BznaFile", _walk_bzna, (BznaFormatError,)),
    ("parse_image_mp4", _walk_mp4, (BznaFormatError,)),
    ("HvcC.from_bytes", _walk_hvcc, (BznaFormatError,)),
    ("SampleList.parse", _walk_list, (SampleListError,)),
)


class Finding(AssertionError):
    """A parser raised an exception its contract does not allow."""


def exercise(data: bytes) -> None:
    """Runs every parser on ``data``; raises :class:`Finding` when one breaks the rule."""
    for what, walk, allowed in WALKS:
        try:
            walk(data)
        except allowed:
            pass
        except Exception as e:  # noqa: BLE001 - any other type is the finding
            raise Finding(f"{what} raised {type(e).__name__}: {e}") from e
