"""The C++ reader against the Python reader on the same bytes (fuzzed corpora, for example).

    python fuzz/differential.py CORPUS_DIR_OR_FILE ...

runs fuzz/build/fuzz_container with $BZNA_FUZZ_DUMP over the inputs (what the
source op would read: index, pictures of both tracks with checksum
verification on and off, targets, names) and reads the same bytes with
bzna_tf.format.BznaFile. Where both readers succeed they must agree exactly
(sample count, picture size, Annex-B bytes, target, name): a difference is a
silent data mistake and is printed, and the exit status is 1. Where one
reader refuses what the other reads, the counts are printed: the C++ reader
parses only the track it reads (the Python reader parses the whole per-image
mp4), so it accepts more, by design.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bzna_tf.format import BznaFile, BznaFormatError
from bzna_tf.format.checksums import crc32c

HARNESS = Path(__file__).resolve().parent / "build" / "fuzz_container"
THUMB, INPUT = "bzna_thumb", "bzna_input"


def cpp_results(paths: list[Path]) -> dict[tuple[int, str], list[str]]:
    """{(size, crc of the input): its dump lines} from one run of the harness over every file."""
    out = {}
    for start in range(0, len(paths), 200):
        run = subprocess.run(
            [str(HARNESS), "-runs=1", *map(str, paths[start : start + 200])],
            env={"BZNA_FUZZ_DUMP": "1", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
        )
        key, lines = None, []
        for line in run.stdout.splitlines():
            if line.startswith("input "):
                if key is not None:
                    out.setdefault(key, lines)
                _, size, crc = line.split()
                key, lines = (int(size), crc), []
            else:
                lines.append(line)
        if key is not None:
            out.setdefault(key, lines)
    return out


def python_line(f: BznaFile | None, line: str) -> str:
    """The dump line the Python reader gives for the same request as the C++ ``line``."""
    parts = line.split()
    if parts[0] == "index":
        return "index error -1" if f is None else f"index ok {len(f)}"
    i = int(parts[1])
    if parts[0] == "picture":
        track, verify = parts[2], parts[3] == "1"
        head = f"picture {i} {track} {parts[3]} "
        try:
            s = f.sample(i, verify=False)
            pic = s.thumb if track == "thumb" else s.input
            data = pic.annexb()
            if verify:
                for _, (stored, computed, _) in f.sample_checksums(
                    i, tracks=(THUMB if track == "thumb" else INPUT,)
                ).items():
                    if stored != computed:
                        return head + "error"
        except BznaFormatError:
            return head + "error"
        return head + f"{pic.width} {pic.height} {len(data)} {crc32c(data):08x}"
    try:
        target = f.target(i)
    except BznaFormatError:
        return f"sample {i} error error "
    try:
        name = f.filename(i)
        kind = "none" if name is None else "name"
        return f"sample {i} {target} {kind} " + ("" if name is None else name.encode().hex())
    except BznaFormatError:
        return f"sample {i} {target} error "


def main(argv: list[str]) -> int:
    # The harness reads as the source op does: the targets, read with the index, checked against the
    # outer index's checksum of them; the names one at a time, unchecked (as_dataset and BznaFile check
    # them, tested apart). The Python reader does the same here: its index opens only if its targets
    # pass, and it reads names without that check, so that both parsers are compared on the names of
    # fuzzed files, whose checksums rarely still match.
    check = BznaFile._check_index_part
    BznaFile._check_index_part = lambda self, what, *args: (
        check(self, what, *args) if what == "targets" else None
    )
    paths = []
    for a in map(Path, argv[1:]):
        paths += sorted(p for p in a.iterdir() if p.is_file()) if a.is_dir() else [a]
    dumps = cpp_results(paths)
    tally, mistakes = Counter(), []
    for path in paths:
        data = path.read_bytes()
        lines = dumps.get((len(data), f"{crc32c(data):08x}"))
        if lines is None:
            tally["not run by the harness"] += 1
            continue
        try:
            f = BznaFile(io.BytesIO(data), name=path.name)
            f.targets  # noqa: B018 (read, and checked, at open by the C++ reader)
        except BznaFormatError:
            f = None
        for line in lines:
            if f is None and not line.startswith("index"):
                break
            py = python_line(f, line)
            kind = line.split()[0]
            c_ok, p_ok = "error" not in line.split(), "error" not in py.split()
            if c_ok and p_ok:
                if py.strip() != line.strip():
                    mistakes.append(f"{path}: C++ {line!r}, Python {py!r}")
                tally[f"{kind}: both read, equal"] += py.strip() == line.strip()
            elif c_ok != p_ok:
                tally[f"{kind}: only {'C++' if c_ok else 'Python'} reads it"] += 1
            else:
                tally[f"{kind}: both refuse"] += 1
    for k in sorted(tally):
        print(f"{k}: {tally[k]}")
    for m in mistakes:
        print("DIFFERENT:", m)
    print(f"{len(paths)} inputs, {len(mistakes)} differences where both readers succeed")
    return 1 if mistakes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
