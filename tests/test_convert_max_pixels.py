"""A decompression bomb is refused from its header, in bounded memory, naming the file (issue 35, item 2).

A PNG of a few hundred kB can declare a picture of 16000 x 16000: decoding
and encoding it took 11 GB and minutes, then failed without naming the file.
The declared size is now read before anything is decoded and checked against
``max_pixels`` (``--max-pixels``, default Pillow's 89,478,485); FFmpeg is
given the limit too, for the formats whose header bzna_tf does not read. The
limit is not in the conversion's fingerprint: each shard records it, and a
rerun with another limit converts again only the shards it changes.
"""

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import types
import zlib

import numpy as np
import pytest
from _sources_data import gradient, ppm

from bzna_tf.cli import main
from bzna_tf.convert import (
    DEFAULT_MAX_PIXELS,
    EncodeOptions,
    ImageDecodeError,
    ImageFolderSource,
    Item,
    convert,
    decode_picture,
)
from bzna_tf.convert.converter import encode_item
from bzna_tf.convert.images import ImageTooLargeError, image_size
from bzna_tf.format import BznaFile

FAST = {"preset": "ultrafast", "crf": 24, "chroma": "average"}
CLI = ["--processes", "0", "--preset", "ultrafast", "--crf", "24", "--chroma", "average", "--no-progress"]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(w, h):
    """A valid grey PNG of w x h zeros: 16000 x 16000 is about 250 kB (zlib packs zeros 1000 to 1)."""
    row = bytes(1 + w)
    z = zlib.compressobj(9)
    per = max(1, (1 << 22) // len(row))
    parts, left = [], h
    while left:
        k = min(left, per)
        parts.append(z.compress(row * k))
        left -= k
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", b"".join(parts) + z.flush())
        + chunk(b"IEND", b"")
    )


def qoi_bomb(w, h):
    """A QOI picture of w x h (a format whose header bzna_tf does not read): 62 pixels per byte."""
    runs, rest = divmod(w * h, 62)
    last = bytes([0xC0 + rest - 1]) if rest else b""  # a run of n pixels is 0xC0 + n - 1
    return b"qoif" + struct.pack(">IIBB", w, h, 3, 0) + b"\xfd" * runs + last + b"\0" * 7 + b"\1"


def pillow_files():
    """(name, data, (width, height)) of every format a folder source takes, as Pillow writes them."""
    Image = pytest.importorskip("PIL.Image")
    rgb = gradient(37, 53, seed=1)
    im = Image.fromarray(rgb)

    def save(image, fmt, **options):
        out = io.BytesIO()
        image.save(out, fmt, **options)
        return out.getvalue()

    rgba = Image.fromarray(np.dstack([rgb, rgb[..., 0]]), "RGBA")
    files = [
        ("jpeg", save(im, "JPEG")),
        ("jpeg-progressive", save(im, "JPEG", progressive=True)),
        ("jpeg-cmyk", save(im.convert("CMYK"), "JPEG")),
        ("jpeg-exif", save(im, "JPEG", exif=im.getexif().tobytes())),
        ("png", save(im, "PNG")),
        ("png-grey", save(im.convert("L"), "PNG")),
        ("png-palette", save(im.convert("P"), "PNG")),
        ("gif", save(im, "GIF")),
        ("bmp", save(im, "BMP")),
        ("webp-lossy", save(im, "WEBP")),
        ("webp-lossless", save(im, "WEBP", lossless=True)),
        ("webp-alpha", save(rgba, "WEBP")),
        ("tiff", save(im, "TIFF")),
        ("tiff-deflate", save(im, "TIFF", compression="tiff_deflate")),
        ("ppm", save(im, "PPM")),
        ("pgm", save(im.convert("L"), "PPM")),
        ("pbm", save(im.convert("1"), "PPM")),
        ("ppm-comment", b"P6\n# made by hand: 9 9\n53 37\n255\n" + rgb.tobytes()),
    ]
    return [(name, data, (53, 37)) for name, data in files]


@pytest.mark.parametrize("name, data, size", pillow_files(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_declared_size_of_every_format_taken_is_read_from_its_header(name, data, size, monkeypatch):
    assert image_size(data) == size
    rgb, _ = decode_picture(data, max_pixels=size[0] * size[1])  # exactly at the limit: decoded
    assert rgb.shape == (size[1], size[0], 3)
    import av

    def no_decoding(*args, **kwargs):
        raise AssertionError("a picture over the limit reached FFmpeg")

    monkeypatch.setattr(av, "open", no_decoding)
    # the class itself replaced: PyAV 17's (Python 3.10's newest) takes no new attributes
    monkeypatch.setattr(av, "CodecContext", types.SimpleNamespace(create=no_decoding))
    over = r"^53 x 37 = 1,961 pixels, over the limit of 1,960 pixels$"
    with pytest.raises(ImageTooLargeError, match=over):
        decode_picture(data, max_pixels=size[0] * size[1] - 1)


def test_a_png_bomb_is_refused_from_its_header_in_bounded_memory_naming_the_file(tmp_path):
    """The issue's case: a 249 kB PNG of 16000 x 16000 (and a QOI bomb, a format read by FFmpeg alone),
    converted in a subprocess whose peak memory is measured."""
    bomb = png_bomb(16000, 16000)
    assert len(bomb) < 300_000
    (tmp_path / "big.png").write_bytes(bomb)
    (tmp_path / "big.qoi").write_bytes(qoi_bomb(16000, 16000))
    (tmp_path / "ok.ppm").write_bytes(ppm(gradient(24, 32)))
    script = textwrap.dedent(
        f"""
        import json, os, resource, sys, time
        from bzna_tf.convert import ConversionError, EncodeOptions, Item, convert
        folder = {str(tmp_path)!r}
        items = [Item(name, 0, path=os.path.join(folder, name), origin=os.path.join(folder, name))
                 for name in ("big.png", "big.qoi", "ok.ppm")]
        enc = EncodeOptions(preset="ultrafast", crf=24, chroma="average")
        start = time.perf_counter()
        try:
            convert(items[:1], os.path.join(folder, "stop.bzna"), encoding=enc, order="source", workers=0,
                    progress=False)
            stopped = ""
        except ConversionError as e:
            stopped = str(e)
        s = convert(items, os.path.join(folder, "out.bzna"), encoding=enc, order="source", workers=0,
                    on_error="skip", progress=False, log=None)
        print(json.dumps({{"stopped": stopped, "skipped": s.skipped, "images": s.images,
                           "seconds": time.perf_counter() - start,
                           "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Linux gives an exec'd process the peak of the memory it replaced (ru_maxrss counts this test
    # process's, a gigabyte once TensorFlow is in): the script runs in a grandchild, forked by a small
    # interpreter, so that its ru_maxrss is its own.
    launch = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', sys.argv[1]]))"
    run = subprocess.run(
        [sys.executable, "-c", launch, script], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    big = os.path.join(str(tmp_path), "big.png")
    assert got["stopped"] == (
        f"{big}: 16000 x 16000 = 256.0 M pixels, over the limit of 89,478,485 pixels (--max-pixels); "
        "--max-pixels N (EncodeOptions(max_pixels=N)) raises the limit, at about 43 bytes of memory per "
        "pixel in each worker; --on-error skip (on_error='skip') leaves such records out and counts them "
        "in the summary"
    )
    assert got["images"] == 1
    (png_origin, png_reason), (qoi_origin, qoi_reason) = got["skipped"]
    assert png_origin == big and png_reason.startswith("16000 x 16000 = 256.0 M pixels, over the limit")
    assert qoi_origin.endswith("big.qoi")
    assert "also what it says of a picture over the limit of 89,478,485 pixels" in qoi_reason
    # Decoding the PNG alone took 1 GB, and encoding it 11 GB; the interpreter, NumPy and PyAV take ~70 MB.
    assert got["peak"] < 400e6, got["peak"] / 1e6
    assert got["seconds"] < 30


def test_max_pixels_is_checked_and_none_removes_the_limit(tmp_path):
    assert EncodeOptions().max_pixels == DEFAULT_MAX_PIXELS == 89_478_485
    assert EncodeOptions(max_pixels=np.int64(1000)).settings["max_pixels"] == 1000
    for bad in (0, -5, 1.5, "100", True):
        with pytest.raises(ValueError, match="Expected `max_pixels` as an integer >= 1, or None for no"):
            EncodeOptions(max_pixels=bad)
    data = ppm(gradient(30, 40))
    assert decode_picture(data, max_pixels=None)[0].shape == (30, 40, 3)
    with pytest.raises(ImageDecodeError, match="40 x 30 = 1,200 pixels, over the limit of 1,199 pixels"):
        decode_picture(data, max_pixels=1199)


def test_a_picture_x265_cannot_encode_is_refused_before_decoding(tmp_path):
    """With no pixel limit, a picture whose coded frame is over H.265's largest level is skipped from its
    header (it took 11 GB to find out, then failed with 'Invalid argument returned 22', naming no file)."""
    header_only = png_bomb(16000, 16000)[:33]  # the signature and IHDR: nothing to decode
    enc = EncodeOptions(**FAST, max_pixels=None)
    result = encode_item(Item("x.png", 0, data=header_only), enc.settings)
    assert result[:2] == (
        "skip",
        "16000 x 16000 pixels, coded as 16384 x 16384 = 268.4 M pixels: more than x265 encodes in one frame "
        "(142,606,336, H.265 level 7.2)",
    )
    compact = EncodeOptions(**FAST, max_pixels=None, layout="compact").settings
    assert encode_item(Item("x.png", 0, data=header_only), compact)[1].startswith(
        "16000 x 16000 pixels, coded as 16000 x 16000 = 256.0 M pixels"
    )


def folder_of_sizes(root):
    """Classes 'a' and 'b' of pictures of 24 x 32 (768 pixels), and 'b' one of 40 x 40 (1600 pixels)."""
    for c, sizes in (("a", [(24, 32)] * 3), ("b", [(24, 32), (40, 40), (24, 32)])):
        (root / c).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes):
            (root / c / f"{i}.ppm").write_bytes(ppm(gradient(h, w, seed=10 * ord(c) + i)))
    return root


def test_a_rerun_with_another_limit_converts_again_only_the_shards_it_changes(tmp_path, capsys):
    root = folder_of_sizes(tmp_path / "m")
    out = tmp_path / "out" / "x.bzna"
    argv = ["convert", "folder", str(root), str(out), *CLI, "--order", "source", "--num-shards", "2"]
    # The default limit stops at nothing here; a limit of 1000 stops at b/1.ppm, naming it and the size.
    assert main([*argv, "--max-pixels", "1000"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"bzna-tf convert: {root / 'b' / '1.ppm'}: 40 x 40 = 1,600 pixels, over the limit of 1,000 pixels "
        "(--max-pixels); --max-pixels N"
    )
    shard0 = out.parent / "x-00000-of-00002.bzna"
    shard1 = out.parent / "x-00001-of-00002.bzna"
    first = shard0.read_bytes()
    assert not shard1.exists()
    # Skipping it: shard 0 is kept, shard 1 records the picture left out over the limit.
    assert main([*argv, "--max-pixels", "1,000", "--on-error", "skip"]) == 0
    said = capsys.readouterr().out
    assert "skipped 1 file that was already converted" in said
    assert "b/1.ppm: 40 x 40 = 1,600 pixels, over the limit of 1,000 pixels (--max-pixels)" in said
    assert shard0.read_bytes() == first
    with BznaFile(shard1) as f:
        assert f.metadata["conversion"]["max_pixels"] == {"limit": 1000, "largest": 768, "over": 1}
        assert f.filenames() == ["b/0.ppm", "b/2.ppm"]
    # The default limit: shard 0 fits it as it is; shard 1 left out a picture that it keeps.
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert (
        "converting x-00001-of-00002.bzna again: it left out 1 image over --max-pixels 1,000 that "
        "--max-pixels 89,478,485 may keep" in said
    )
    assert "skipped 1 file that was already converted" in said and shard0.read_bytes() == first
    with BznaFile(shard1) as f:
        assert f.filenames() == ["b/0.ppm", "b/1.ppm", "b/2.ppm"]
        recorded = f.metadata["conversion"]["max_pixels"]
        assert recorded == {"limit": DEFAULT_MAX_PIXELS, "largest": 1600, "over": 0}
    fresh = tmp_path / "fresh" / "x.bzna"
    assert main([*argv[:3], str(fresh), *argv[4:]]) == 0
    capsys.readouterr()
    assert shard1.read_bytes() == (fresh.parent / shard1.name).read_bytes()  # as a conversion from scratch
    # A lower limit: the shard holding a picture over it is converted again (and skips it).
    assert main([*argv, "--max-pixels", "1000", "--on-error", "skip"]) == 0
    said = capsys.readouterr().out
    again = (
        "converting x-00001-of-00002.bzna again: it holds a picture of 1,600 pixels, over --max-pixels 1,000"
    )
    assert again in said
    assert shard0.read_bytes() == first
    # The same command again: both finished.
    assert main([*argv, "--max-pixels", "1000", "--on-error", "skip"]) == 0
    assert "skipped 2 files that were already converted" in capsys.readouterr().out


def test_the_default_limit_leaves_the_fingerprint_as_it_was(tmp_path):
    """Conversions begun before the limit existed still resume: it is not in the fingerprint."""
    from bzna_tf.convert.plan import fingerprint

    src = ImageFolderSource(folder_of_sizes(tmp_path / "m"))
    plain = EncodeOptions(**FAST)

    class Before:
        settings = {k: v for k, v in plain.settings.items() if k != "max_pixels"}

    assert fingerprint(src, plain) == fingerprint(src, Before())
    assert fingerprint(src, EncodeOptions(**FAST, max_pixels=1000)) == fingerprint(src, plain)
    out = tmp_path / "x.bzna"
    convert(src, out, encoding=plain, workers=0, progress=False)
    with BznaFile(out) as f:  # a shard written before the limit existed records none, and is kept
        facts = dict(f.metadata["conversion"])
    facts.pop("max_pixels")
    from bzna_tf.convert.converter import _max_pixels_change

    assert _max_pixels_change(facts.get("max_pixels"), 1000) == ""


def test_the_command_line_takes_a_count_or_none(tmp_path, capsys):
    from bzna_tf.cli import build_parser

    parse = build_parser().parse_args
    base = ["convert", "folder", "src", "out.bzna"]
    assert parse(base).max_pixels == DEFAULT_MAX_PIXELS
    assert parse([*base, "--max-pixels", "none"]).max_pixels is None
    assert parse([*base, "--max-pixels", "200_000_000"]).max_pixels == 200_000_000
    with pytest.raises(SystemExit):
        parse([*base, "--max-pixels", "0"])
    assert "expected a number of pixels >= 1, or none. Received: '0'" in capsys.readouterr().err
