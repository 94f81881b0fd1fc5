"""Writes the seed corpora of the libFuzzer harnesses (fuzz/README.md).

    python fuzz/make_corpus.py OUT [--fixture PATH]

makes OUT/<harness>/ for each harness of fuzz/Makefile from real files:

- files our converter writes (bzna_tf.convert.convert on a few tiny made-up
  images): the benzina and the compact layout, with checksums (the default),
  one image larger than 512 on a side (a separate thumbnail) and unlabelled
  ones; one file without checksums and with 64-bit chunk offsets;
- the original tools' fixture (shared/fixtures/benzina-original when present,
  else the repository's tests/fixtures/benzina-original-free): its smallest
  per-image mp4s, as they are, and repacked by our writer into small .bzna
  files (a whole fixture would make every mutation slow).

fuzz_container gets the .bzna files, fuzz_sample each per-image mp4 behind
the 15-byte header fuzz_sample.cc describes (the real thumbnail offset and
checksums, and variants), fuzz_decode_warp each Annex-B picture behind 48
bytes of warp parameters, fuzz_warp and fuzz_crc32c a few byte strings.
Nothing here is random: the same inputs give the same corpora.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURE = next(
    (
        p
        for p in (
            ROOT.parent / "shared" / "fixtures" / "benzina-original" / "benzina_original_mini.bzna",
            ROOT / "tests" / "fixtures" / "benzina-original-free" / "benzina_original_free.bzna",
        )
        if p.is_file()
    ),
    None,
)
# Fixture samples small enough to seed with (hopper.jpg, 21 KB; the first, 87 KB or 26 KB).
FIXTURE_SAMPLES = (11, 0)


def _image(h: int, w: int, seed: int) -> bytes:
    """A small smooth PNG (x265 compresses it to a few hundred bytes)."""
    from PIL import Image

    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    a, b = (seed % 5 + 1) / 5.0, (seed % 3 + 1) / 3.0
    rgb = np.stack([xx * 255 * a / w, yy * 255 * b / h, (xx + yy) * 127 / (w + h)], -1).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


def converted_files(folder: Path) -> list[Path]:
    """.bzna files written by bzna_tf's converter, in both layouts."""
    from bzna_tf.convert import EncodeOptions, convert
    from bzna_tf.convert.sources import Item

    items = [
        Item("small.png", 0, _image(24, 40, 0)),
        Item("wide.png", 1, _image(40, 600, 1)),  # > 512 wide: a separate thumbnail
        Item("odd.png", None, _image(17, 9, 2)),  # unlabelled, odd sizes
    ]
    out = []
    for layout in ("benzina", "compact"):
        path = folder / f"converted_{layout}.bzna"
        encoding = EncodeOptions(layout=layout, preset="ultrafast")
        convert(items, path, encoding=encoding, order="source", workers=0, progress=False, log=io.StringIO())
        out.append(path)
    # No checksums and 64-bit chunk offsets: the writer with the converter's pictures.
    from bzna_tf.format import BznaFile, BznaWriter

    plain = folder / "converted_co64_nochecksums.bzna"
    with BznaFile(out[1]) as src, BznaWriter(plain, force_co64=True, checksums=False) as w:
        for i in range(len(src)):
            w.append_mp4(
                src.sample_bytes(i),
                target=None if src.target(i) < 0 else src.target(i),
                filename=src.filename(i),
            )
    out.append(plain)
    return out


def fixture_files(fixture: Path, folder: Path) -> list[Path]:
    """The fixture's small per-image mp4s repacked by our writer (with and without checksums)."""
    from bzna_tf.format import BznaFile, BznaWriter

    out = []
    with BznaFile(fixture) as src:
        for checksums in (True, False):
            path = folder / f"fixture_{'checksums' if checksums else 'plain'}.bzna"
            with BznaWriter(path, checksums=checksums) as w:
                for i in FIXTURE_SAMPLES[: 1 if checksums else 2]:
                    w.append_mp4(src.sample_bytes(i), target=src.target(i), filename=src.filename(i))
            out.append(path)
    return out


def sample_seeds(path: Path) -> list[bytes]:
    """fuzz_sample inputs for each sample of a .bzna: header + its per-image mp4."""
    from bzna_tf.format import BznaFile

    seeds = []
    with BznaFile(path) as f:
        sums = f.checksums
        for i in range(len(f)):
            off, _ = f.sample_location(i)
            mp4 = f.sample_bytes(i)
            thumb_at = f.thumb_location(i)[0] - off
            crcs = (0, 0)
            flags = 1
            if sums is not None and sums.supported:
                crcs = (int(sums.tracks["bzna_input"][i]), int(sums.tracks["bzna_thumb"][i]))
                flags |= 2 | 4
            for lead, trail in ((0, 0), (24, 7)):
                seeds.append(struct.pack(">BBBIII", flags, lead, trail, thumb_at, *crcs) + mp4)
            seeds.append(struct.pack(">BBBIII", 0, 0, 0, 0, 0, 0) + mp4)  # no thumb track, no checksums
    return seeds


def picture_seeds(path: Path) -> list[bytes]:
    """fuzz_decode_warp inputs: 48 bytes of warp parameters + each Annex-B picture (thumb and input)."""
    from bzna_tf.format import BznaFile

    params = [
        bytes(48),  # identity-ish: output 1x1, raw matrix of zeros
        # NHWC, antialias; output 12x9; an affine 2x reduction with a small rotation.
        bytes([2]) + struct.pack(">II", 11, 8) + bytes([1, 160, 0, 160, 0, 20, 128, 128]) + bytes(31),
        # NCHW, no antialias; output 24x24; an exact resize (the separable path).
        bytes([1]) + struct.pack(">II", 23, 23) + bytes([3, 150, 0, 140, 0, 128, 128]) + bytes(32),
    ]
    seeds = []
    with BznaFile(path) as f:
        for i in range(min(len(f), 2)):
            s = f.sample(i, verify=False)
            for k, pic in enumerate({s.thumb.annexb(), s.input.annexb()}):
                seeds.append(params[(i + k) % len(params)] + pic)
    return seeds


def format_seeds(files: list[Path]) -> list[bytes]:
    """fuzz_format.py inputs: per-image mp4s, hvcC payloads and sample lists (the .bzna files come
    from the fuzz_container corpus)."""
    from bzna_tf.format import BznaFile, SampleList

    seeds = []
    for path in files[:2]:
        with BznaFile(path) as f:
            for i in range(len(f)):
                mp4 = f.sample_bytes(i)
                seeds.append(mp4)
                start, size = f.sample(i, verify=False).input.hvcc_payload
                seeds.append(mp4[start - f.sample_location(i)[0] : start - f.sample_location(i)[0] + size])
    paths = ["/data/a.bzna", "/data/sub/b.bzna"]
    starts = [0, 5, 305]
    kinds = ("CONDUIT_HDF5_INCLUSION", "MULTI-SAMPLE_EXCLUSION", "MULTI-SAMPLE_INCLUSION_V2", "SINGLE-SAMPLE")
    for kind in kinds:
        sl = SampleList.from_indices(paths, starts, [0, 2, 3, 4, 10, 11, 12, 13, 200], kind=kind)
        seeds.append(sl.to_text().encode())
    return seeds


def warp_seeds() -> list[bytes]:
    """fuzz_warp inputs: each source kind, layout and antialias setting, with each matrix form."""
    seeds = []
    for mode in range(16):
        for form in range(4):
            head = bytes([mode]) + struct.pack(">IIII", 40 + mode, 30, 16, 12)
            body = bytes([mode % 4, form, 140, 0, 120, 1, 40, 128, 128, 140, 116]) + bytes(range(44))
            seeds.append(head + body + bytes(range(256)))
    return seeds


def crc_seeds() -> list[bytes]:
    return [b"", b"123456789", bytes(32), b"\xff" * 32, bytes(range(256)) * 3, b"\x00\x07" + bytes(4099)]


def write(folder: Path, seeds: list[bytes]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        (folder / hashlib.sha1(s).hexdigest()).write_bytes(s)
    return len(seeds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write <harness>/ seed folders into")
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="the original-tools .bzna")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = converted_files(tmp)
        if args.fixture is not None and args.fixture.is_file():
            files += fixture_files(args.fixture, tmp)
        else:
            print(f"make_corpus: no fixture at {args.fixture}; converted files only", file=sys.stderr)
        out = args.out
        counts = {
            "fuzz_container": write(out / "fuzz_container", [p.read_bytes() for p in files]),
            "fuzz_sample": write(out / "fuzz_sample", [s for p in files for s in sample_seeds(p)]),
            "fuzz_decode_warp": write(out / "fuzz_decode_warp", [s for p in files for s in picture_seeds(p)]),
            "fuzz_warp": write(args.out / "fuzz_warp", warp_seeds()),
            "fuzz_crc32c": write(args.out / "fuzz_crc32c", crc_seeds()),
            "fuzz_format": write(args.out / "fuzz_format", format_seeds(files)),
        }
    sizes = {h: sum(f.stat().st_size for f in (args.out / h).iterdir()) for h in counts}
    print(
        "make_corpus: " + ", ".join(f"{h} {n} seeds ({sizes[h] // 1024} KiB)" for h, n in counts.items()),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
