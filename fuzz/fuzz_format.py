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

The rule (``exercise`` in fuzz/format_rule.py checks it): each call succeeds
or raises the error its docstring names (BznaFormatError for .bzna data,
SampleListError for lists); any other exception is a finding, and so is a
hang or a huge allocation (libFuzzer's -timeout and -rss_limit_mb).
tests/test_fuzzing.py runs ``exercise`` under hypothesis and replays the
committed reproducers of fuzz/regressions/fuzz_format/.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("-")]
    if args and all(os.path.isfile(a) for a in args):
        from format_rule import exercise

        for path in args:  # replay, without atheris
            with open(path, "rb") as f:
                exercise(f.read())
            print(f"{path}: ok")
        return 0
    import atheris

    # Coverage of bzna_tf and the rule only (instrumenting everything loaded, NumPy included,
    # takes a minute).
    with atheris.instrument_imports(include=["bzna_tf", "format_rule"]):
        from format_rule import exercise

    atheris.Setup(argv, lambda data: exercise(bytes(data)))
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
