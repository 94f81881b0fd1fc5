"""atheris harness of the pure-Python reader (bzna_tf.format) and the sample-list parser.

    python fuzz/fuzz_format.py [libFuzzer flags] [CORPUS_DIR ...]   fuzz (atheris)
    python fuzz/fuzz_format.py FILE ...                             replay inputs

Each input goes through every parser that takes bytes or text:

- ``BznaFile`` on the bytes (as a file object), walked as a reader walks
  it: the targets, the filenames, the metadata box and its class names, the
  checksum table and the index checksums, then each sample (the per-image mp4
  parsed, its pictures as Annex-B, their checksums) and its thumbnail location;
- ``parse_image_mp4`` on the bytes, and each picture as Annex-B;
- ``HvcC.from_bytes`` on the bytes (an ``hvcC`` payload), and ``split_nals``;
- ``SampleList.parse`` on the bytes as UTF-8 text, then ``global_indices``
  against two made-up data files (no filesystem access).

The rule (:func:`exercise` checks it): each call succeeds or raises the error
its docstring names (BznaFormatError for .bzna data, SampleListError for
lists); any other exception is a finding, and so is a hang or a huge
allocation (libFuzzer's -timeout and -rss_limit_mb / -malloc_limit_mb).
tests/test_fuzz_format.py runs :func:`exercise` under hypothesis and replays
the committed reproducers of fuzz/regressions/fuzz_format/.
"""

from __future__ import annotations

import io
import os
import sys

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


def main(argv: list[str]) -> int:
    files = [a for a in argv[1:] if not a.startswith("-") and os.path.isfile(a)]
    if files and len(files) == len([a for a in argv[1:] if not a.startswith("-")]):
        for path in files:  # replay, without atheris
            with open(path, "rb") as f:
                exercise(f.read())
            print(f"{path}: ok")
        return 0
    import atheris

    atheris.instrument_all()  # coverage of every module loaded (bzna_tf.format and what it uses)
    atheris.Setup(argv, lambda data: exercise(bytes(data)))
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
