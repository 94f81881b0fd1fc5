"""What conversion does to pictures is said: EXIF orientation, transparency, CMYK, 16 bits (issue 34, item 4).

By default the stored pixels are the file's, as TensorFlow, Keras and
torchvision decode them (an EXIF orientation is not applied, alpha is dropped
with the colour under it kept, CMYK and 16-bit are converted). Each case is
counted in the summary and in each file's conversion facts (``bzna-tf info``);
``exif_transpose`` turns pictures upright and ``alpha_background`` composites
them, and both are part of what a resumed conversion checks.
"""

import io
import json

import numpy as np
import pytest
from _sources_data import gradient, pictures_by_name, reference

from bzna_tf.cli import main
from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    ImageFolderSource,
    Item,
    convert,
    decode_image,
    decode_picture,
)
from bzna_tf.convert.images import ImageDamagedError, ImageDecodeError
from bzna_tf.format import BznaFile

Image = pytest.importorskip("PIL.Image", reason="the test pictures are written with Pillow")
ImageOps = pytest.importorskip("PIL.ImageOps")

FAST = {"preset": "ultrafast", "crf": 24, "chroma": "average"}
CLI = ["--processes", "0", "--preset", "ultrafast", "--crf", "24", "--chroma", "average", "--no-progress"]
RGB = gradient(20, 30, seed=3)  # (H, W) = (20, 30)
ALPHA = np.tile(np.where(np.arange(30) < 10, 0, np.where(np.arange(30) < 20, 128, 255)), (20, 1)).astype(
    np.uint8
)


def encoded(image, fmt, **save):
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def with_orientation(fmt, orientation, rgb=RGB):
    im = Image.fromarray(rgb)
    exif = im.getexif()
    exif[0x0112] = orientation
    return encoded(im, fmt, exif=exif.tobytes())


def rgba_png():
    return encoded(Image.fromarray(np.dstack([RGB, ALPHA]), "RGBA"), "PNG")


def png16():
    """A 16-bit RGB PNG (Pillow writes only 16-bit grey; PyAV writes this one)."""
    import av

    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = 30, 20, "rgb48be"
    frame = av.VideoFrame.from_ndarray(RGB.astype(np.uint16) * 257, format="rgb48le")
    return bytes((ctx.encode(frame) + ctx.encode(None))[0])


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "TIFF"])
def test_every_exif_orientation_is_reported_and_turned_upright_as_pillow_does(fmt):
    for orientation in range(1, 9):
        data = with_orientation(fmt, orientation)
        rgb, facts = decode_picture(data)
        if fmt == "TIFF":  # the tag is part of a TIFF's raster: Pillow (torchvision) opens it upright
            assert facts == ({} if orientation == 1 else {"tiff_orientation": orientation})
            assert np.array_equal(rgb, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
        else:
            assert rgb.shape == (20, 30, 3)  # by default: as decoded, not turned
            assert facts == ({} if orientation == 1 else {"exif_orientation": orientation})
        upright, _ = decode_picture(data, exif_transpose=True)
        pillow = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
        want = np.asarray(pillow) if fmt in ("PNG", "TIFF") else None
        if want is not None:  # lossless: Pillow's pixels exactly
            assert np.array_equal(upright, want), orientation
        else:  # lossy: Pillow's own decoder differs a little; the turn is the same
            assert upright.shape == np.asarray(pillow).shape
            assert np.abs(upright.astype(int) - np.asarray(pillow).astype(int)).mean() < 3


def test_alpha_cmyk_and_16_bits_are_reported_and_alpha_composited_when_asked():
    rgb, facts = decode_picture(rgba_png())
    assert facts == {"alpha": True} and np.array_equal(rgb, RGB)  # the colour under transparent pixels kept
    over, _ = decode_picture(rgba_png(), alpha_background="white")
    a = ALPHA[..., None].astype(np.float64) / 255
    assert np.array_equal(over, np.rint(RGB * a + 255 * (1 - a)).astype(np.uint8))
    assert (over[:, :10] == 255).all() and np.array_equal(over[:, 20:], RGB[:, 20:])
    # An alpha channel without a transparent pixel is no case to report, and is not composited.
    opaque = encoded(Image.fromarray(np.dstack([RGB, np.full((20, 30), 255, np.uint8)]), "RGBA"), "PNG")
    rgb, facts = decode_picture(opaque, alpha_background="black")
    assert facts == {} and np.array_equal(rgb, RGB)
    # A palette's transparency counts too.
    palette = encoded(Image.fromarray(RGB).convert("P"), "PNG", transparency=0)
    assert decode_picture(palette)[1] == {"alpha": True}
    assert decode_picture(encoded(Image.fromarray(RGB).convert("P"), "PNG"))[1] == {}  # an opaque palette
    cmyk = encoded(Image.fromarray(RGB).convert("CMYK"), "JPEG", quality=95)
    rgb, facts = decode_picture(cmyk)
    assert facts == {"cmyk": True} and np.abs(rgb.astype(int) - RGB).mean() < 4
    rgb, facts = decode_picture(png16())
    assert facts == {"high_bit_depth": 16} and np.array_equal(rgb, RGB)  # v * 257 >> 8 == v
    assert decode_picture(encoded(Image.fromarray(RGB), "PNG"))[1] == {}
    assert np.array_equal(decode_image(rgba_png(), alpha_background=(0, 0, 0))[:, :10], np.zeros((20, 10, 3)))


def _adobe_transform_set(jpeg: bytes, transform: int) -> bytes:
    """``jpeg`` with its Adobe marker's colour transform byte set (Pillow writes 0, CMYK)."""
    at = jpeg.index(b"\xff\xee") + 4 + 11
    assert jpeg[at - 11 : at - 6] == b"Adobe"
    return jpeg[:at] + bytes([transform]) + jpeg[at + 1 :]


@pytest.mark.parametrize("progressive", [False, True])
def test_ycck_jpegs_named_c_m_y_k_keep_their_colours_as_libjpeg_decodes_them(progressive):
    # YCCK (Adobe transform 2) is what Photoshop writes for CMYK. libjpeg (Pillow, TensorFlow) goes by the
    # transform; FFmpeg takes components named C, M, Y, K for CMYK whatever the marker says, so a YCCK file
    # with those names (Pillow's CMYK writer names them so) came out in wrong colours.
    cmyk = np.asarray(Image.fromarray(RGB).convert("CMYK")).astype(np.float64)
    r, g, b = (255 - cmyk[..., k] for k in range(3))
    ycc = [0.299 * r + 0.587 * g + 0.114 * b,
           -0.168736 * r - 0.331264 * g + 0.5 * b + 128,
           0.5 * r - 0.418688 * g - 0.081312 * b + 128]  # fmt: skip
    ycck = np.clip(np.rint(np.dstack([*ycc, cmyk[..., 3]])), 0, 255).astype(np.uint8)
    plain = encoded(Image.fromarray(ycck, "CMYK"), "JPEG", quality=95, progressive=progressive)
    assert plain.count(b"\xff\xda") > (1 if progressive else 0)  # every scan header is renamed
    data = _adobe_transform_set(plain, 2)
    pillow = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)
    assert np.abs(pillow - RGB).mean() < 3  # the file is the picture, as libjpeg reads it
    rgb, facts = decode_picture(data)
    assert facts == {"cmyk": True}
    assert np.abs(rgb.astype(int) - pillow).mean() < 2, np.abs(rgb.astype(int) - pillow).mean()
    # The same bytes read as CMYK (transform 0) are another picture, and stay so.
    assert np.abs(decode_picture(plain)[0].astype(int) - RGB).mean() > 20


def test_16_bit_pictures_keep_the_high_byte_in_grey_and_colour_as_tensorflow_does():
    import av
    import tensorflow as tf

    # Values off the multiples of 257: FFmpeg's own reduction dithered them, grey and colour differently.
    deep = (np.arange(20 * 30 * 3, dtype=np.uint32).reshape(20, 30, 3) * 2731 % 65536).astype(np.uint16)
    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = 30, 20, "rgb48be"
    colour = bytes(ctx.encode(av.VideoFrame.from_ndarray(deep, format="rgb48le"))[0])
    grey = encoded(Image.fromarray(deep[..., 0]), "PNG")  # Pillow writes I;16 as a 16-bit grey PNG
    for data, want in ((colour, deep), (grey, np.repeat(deep[..., :1], 3, axis=2))):
        rgb, facts = decode_picture(data)
        assert facts == {"high_bit_depth": 16}
        assert np.array_equal(rgb, (want >> 8).astype(np.uint8))
        reference = tf.image.convert_image_dtype(tf.io.decode_png(data, dtype=tf.uint16), tf.uint8).numpy()
        assert np.array_equal(rgb, np.broadcast_to(reference, rgb.shape))
    # Composited over a colour, an opaque pixel keeps the same high byte.
    alpha = np.full((20, 30, 1), 65535, np.uint16)
    alpha[0, 0] = 0
    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = 30, 20, "rgba64be"
    rgba = bytes(ctx.encode(av.VideoFrame.from_ndarray(np.dstack([deep, alpha]), format="rgba64le"))[0])
    over, facts = decode_picture(rgba, alpha_background="black")
    assert facts == {"high_bit_depth": 16, "alpha": True}
    assert np.array_equal(over[1:], (deep[1:] >> 8).astype(np.uint8)) and (over[0, 0] == 0).all()


def raw_profile_png(orientation, chunk=b"zTXt"):
    """A PNG whose EXIF is in ImageMagick's "Raw profile type exif" text chunk (FFmpeg refused such files)."""
    import struct
    import zlib

    im = Image.fromarray(RGB)
    exif = im.getexif()
    exif[0x0112] = orientation
    body = b"Exif\0\0" + exif.tobytes()
    hexed = body.hex()
    text = f"\nexif\n{len(body):8d}\n" + "\n".join(hexed[i : i + 72] for i in range(0, len(hexed), 72)) + "\n"
    payload = text.encode()
    data = b"Raw profile type exif\0" + (b"\0" + zlib.compress(payload) if chunk == b"zTXt" else payload)
    png = encoded(im, "PNG")
    crc = zlib.crc32(chunk + data)
    return png[:33] + struct.pack(">I", len(data)) + chunk + data + struct.pack(">I", crc) + png[33:]


@pytest.mark.parametrize("chunk", [b"zTXt", b"tEXt"])
def test_a_png_with_exif_in_a_text_chunk_decodes_and_its_orientation_is_read_as_pillow_does(chunk):
    data = raw_profile_png(6, chunk)
    assert Image.open(io.BytesIO(data)).getexif()[0x0112] == 6
    rgb, facts = decode_picture(data)
    assert facts == {"exif_orientation": 6} and np.array_equal(rgb, RGB)
    upright, _ = decode_picture(data, exif_transpose=True)
    assert np.array_equal(upright, np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data)))))


def _one_class(tmp_path, files):
    """tmp_path/pics/any/ holding ``files`` ({name: bytes}), a folder source of one class: that folder."""
    root = tmp_path / "pics" / "any"
    root.mkdir(parents=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


def test_lenient_decoding_says_which_pictures_were_repaired(tmp_path, capsys):
    whole = encoded(Image.fromarray(np.tile(RGB, (4, 4, 1))), "JPEG", quality=90)
    cut = whole[: len(whole) * 2 // 3]
    assert decode_picture(whole, lenient=True)[1] == {}  # an undamaged picture is not "repaired"
    rgb, facts = decode_picture(cut, lenient=True)
    assert facts == {"repaired": True} and rgb.shape == (80, 120, 3)
    root = _one_class(tmp_path, {"cut.jpg": cut, "whole.jpg": whole})
    out = tmp_path / "l.bzna"
    assert main(["convert", "folder", str(tmp_path / "pics"), str(out), *CLI, "--lenient"]) == 0
    assert (
        "pictures: 1 image with decoding errors stored as the decoder concealed them (--lenient), "
        f"{root / 'cut.jpg'}"
    ) in capsys.readouterr().out
    with BznaFile(out) as f:
        assert f.metadata["conversion"]["pictures"]["repaired"] == 1


def test_a_jpeg_compressed_tiff_is_refused_not_stored_black(tmp_path):
    # FFmpeg's TIFF decoder returns a black picture for JPEG compression (what libtiff and Pillow write).
    data = encoded(Image.fromarray(RGB), "TIFF", compression="jpeg")
    said = (
        r"a JPEG-compressed TIFF \(compression 7\), which FFmpeg's TIFF decoder turns into a black picture: "
    )
    with pytest.raises(ImageDecodeError, match=said + r"TIFF data of \d+ bytes"):
        decode_picture(data, lenient=True)
    item = Item(data=data, target=0, filename="scan.tif", origin="scan.tif")
    with pytest.raises(ConversionError) as e:
        convert([item], tmp_path / "x.bzna", encoding=EncodeOptions(**FAST), progress=False)
    said = str(e.value)
    assert "scan.tif" in said and "save it as PNG or JPEG first" in said and "--lenient" not in said
    # Other compressions decode as Pillow does.
    for compression in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits"):
        assert np.array_equal(
            decode_picture(encoded(Image.fromarray(RGB), "TIFF", compression=compression))[0], RGB
        )


def test_a_damaged_tiff_is_refused_or_kept_as_repaired_with_lenient(tmp_path, capsys):
    # FFmpeg's TIFF decoder says a damaged strip only in its log, and leaves what it could not decode black.
    whole = encoded(Image.fromarray(np.tile(RGB, (4, 4, 1))), "TIFF", compression="tiff_lzw")
    damaged = bytearray(whole)
    damaged[200:240] = bytes(b ^ 0x5A for b in damaged[200:240])
    damaged = bytes(damaged)
    for _ in range(2):  # the same message twice is still heard (FFmpeg skips repeated messages by default)
        with pytest.raises(
            ImageDamagedError, match=r"FFmpeg's decoder reported damage \(tiff: .*\): TIFF data"
        ):
            decode_picture(damaged)
    assert decode_picture(whole, lenient=True)[1] == {}  # an undamaged picture is not "repaired"
    rgb, facts = decode_picture(damaged, lenient=True)
    assert facts == {"repaired": True} and rgb.shape == (80, 120, 3)
    _one_class(tmp_path, {"damaged.tif": damaged, "whole.tif": whole})
    out = tmp_path / "t.bzna"
    assert main(["convert", "folder", str(tmp_path / "pics"), str(out), *CLI]) == 1
    err = capsys.readouterr().err
    assert "damaged.tif" in err and "FFmpeg's decoder reported damage" in err and "--lenient" in err
    assert main(["convert", "folder", str(tmp_path / "pics"), str(out), *CLI, "--lenient"]) == 0
    assert (
        "pictures: 1 image with decoding errors stored as the decoder concealed them"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize("alpha", [False, True], ids=["rgb", "rgba"])
def test_a_lossy_webp_decodes_to_the_rgb_libwebp_gives(alpha):
    rng = np.random.default_rng(5)
    h, w = 37, 53  # odd: the last chroma row and column cover one pixel
    rgb = np.clip(gradient(h, w, seed=4).astype(int) + rng.normal(0, 8, (h, w, 3)), 0, 255)
    rgb = rgb.astype(np.uint8)
    rgb[10:25, 15:40] = (250, 20, 30)  # sharp colour edges: where FFmpeg's conversion was 100 levels away
    opacity = np.where(np.arange(w) < w // 2, 255, 128).astype(np.uint8)  # half of it see-through
    image = Image.fromarray(np.dstack([rgb, np.tile(opacity, (h, 1))]) if alpha else rgb)
    data = encoded(image, "WEBP", quality=90, exact=True)  # exact: the colour under transparency kept
    # libwebp's decoding (Pillow's; TensorFlow >= 2.17 reads WebP with libwebp too, and gives the same).
    libwebp = np.asarray(Image.open(io.BytesIO(data)).convert("RGBA")).astype(int)
    want = libwebp[..., :3]
    got, facts = decode_picture(data)
    got = got.astype(int)
    assert facts == ({"alpha": True} if alpha else {})
    assert np.abs(got - want).max() <= 2 and np.abs((got - want).mean((0, 1))).max() < 0.25
    if alpha:  # composited over a colour: the same colours, as libwebp's RGBA composited
        a = libwebp[..., 3:] / 255
        over = np.rint(libwebp[..., :3] * a + 255 * (1 - a))
        assert np.abs(decode_picture(data, alpha_background="white")[0] - over).max() <= 2
    # Lossless WebP is RGB already: exact.
    assert np.array_equal(decode_picture(encoded(Image.fromarray(rgb), "WEBP", lossless=True))[0], rgb)


def test_an_animated_webp_is_refused_saying_what_to_do(tmp_path):
    frames = [Image.fromarray(np.full((20, 30, 3), v, np.uint8)) for v in (10, 200)]
    data = encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, lossless=True)
    item = Item(data=data, target=0, filename="anim.webp", origin="anim.webp")
    with pytest.raises(ConversionError) as e:
        convert([item], tmp_path / "x.bzna", encoding=EncodeOptions(**FAST), progress=False)
    said = str(e.value)
    assert "anim.webp" in said and "animated WebP is not read: save its first frame" in said
    assert "--lenient" not in said  # lenient decoding would not help


def test_a_gifs_transparent_pixels_are_black_as_tensorflow_decodes_them():
    import tensorflow as tf

    # Entry 1 (blue) is transparent: the top half. FFmpeg's GIF decoder painted it white by default.
    gif = Image.new("P", (10, 10), 0)
    gif.putpalette([200, 30, 30, 30, 30, 200] + [0, 0, 0] * 254)
    gif.paste(1, (0, 0, 10, 5))
    data = encoded(gif, "GIF", transparency=1)
    rgb, facts = decode_picture(data)
    assert facts == {"alpha": True}
    assert np.array_equal(rgb, tf.io.decode_image(data, expand_animations=False).numpy())
    assert (rgb[:5] == 0).all() and (rgb[5:] == (200, 30, 30)).all()
    over, _ = decode_picture(data, alpha_background="white")
    assert (over[:5] == 255).all() and (over[5:] == (200, 30, 30)).all()


def test_encode_options_check_and_normalise_the_picture_options():
    assert EncodeOptions(alpha_background="#FF8000").alpha_background == (255, 128, 0)
    assert EncodeOptions(alpha_background="10, 20,30").alpha_background == (10, 20, 30)
    assert EncodeOptions(alpha_background=[0, 0, 0]).settings["alpha_background"] == (0, 0, 0)
    for bad in ("pink", "#12345", (1, 2), (0, 0, 256), "1,2,x"):
        with pytest.raises(
            ValueError, match=r"Expected `alpha_background` as a colour: .* Received: alpha_back"
        ):
            EncodeOptions(alpha_background=bad)
    with pytest.raises(
        ValueError, match=r"Expected `exif_transpose` as True or False. Received: exif_transpose=1"
    ):
        EncodeOptions(exif_transpose=1)


@pytest.fixture()
def folder(tmp_path):
    """One class of five pictures: EXIF orientation 6, transparent pixels, CMYK, 16 bits, and a plain one."""
    root = tmp_path / "pics" / "any"
    root.mkdir(parents=True)
    (root / "a_rotated.jpg").write_bytes(with_orientation("JPEG", 6))
    (root / "b_transparent.png").write_bytes(rgba_png())
    (root / "c_cmyk.jpg").write_bytes(encoded(Image.fromarray(RGB).convert("CMYK"), "JPEG", quality=95))
    (root / "d_deep.png").write_bytes(png16())
    (root / "e_plain.png").write_bytes(encoded(Image.fromarray(RGB), "PNG"))
    return root.parent


def test_each_case_is_counted_in_the_summary_and_the_files_facts(tmp_path, folder, capsys):
    out = tmp_path / "o.bzna"
    assert main(["convert", "folder", str(folder), str(out), *CLI, "--order", "source"]) == 0
    printed = capsys.readouterr().out
    assert (
        "pictures: 1 image with an EXIF orientation stored as decoded, not turned upright (as TensorFlow, "
        "Keras and torchvision decode them; --exif-transpose turns them), "
        + str(folder / "any" / "a_rotated.jpg")
    ) in printed
    assert (
        "pictures: 1 image with transparent pixels stored without their alpha, the colour under them kept "
        "(as TensorFlow, Keras and torchvision decode them; --alpha-background COLOR composites them), "
        + str(folder / "any" / "b_transparent.png")
    ) in printed
    assert f"pictures: 1 CMYK image converted to RGB, {folder / 'any' / 'c_cmyk.jpg'}" in printed
    assert (
        "pictures: 1 image with more than 8 bits per channel reduced to 8 (the high byte), "
        f"{folder / 'any' / 'd_deep.png'}" in printed
    )
    with BznaFile(out) as f:
        facts = f.metadata["conversion"]
        assert facts["pictures"] == {
            "exif_orientation": 1,
            "tiff_orientation": 0,
            "alpha": 1,
            "cmyk": 1,
            "high_bit_depth": 1,
            "repaired": 0,
        }
        assert facts["exif_transpose"] is False and facts["alpha_background"] is None
        assert f.sample(0).input.size == (30, 20)  # stored as decoded: 30 wide, 20 high
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "  pictures  1 image with an EXIF orientation stored as decoded" in info
    assert "  pictures  1 CMYK image converted to RGB\n" in info
    assert main(["info", "--json", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["conversion"]["pictures"]["alpha"] == 1


def test_exif_transpose_and_alpha_background_change_the_stored_pictures(tmp_path, folder, capsys):
    out = tmp_path / "t.bzna"
    argv = ["convert", "folder", str(folder), str(out), *CLI, "--order", "source"]
    assert main([*argv, "--exif-transpose", "--alpha-background", "white"]) == 0
    printed = capsys.readouterr().out
    assert "pictures: 1 image with an EXIF orientation turned upright (--exif-transpose), " in printed
    assert (
        "pictures: 1 image with transparent pixels composited over (255, 255, 255) (--alpha-background), "
        in printed
    )
    with BznaFile(out) as f:
        assert f.sample(0).input.size == (20, 30)  # turned: 20 wide, 30 high
        facts = f.metadata["conversion"]
        assert facts["exif_transpose"] is True and facts["alpha_background"] == [255, 255, 255]
    # Byte for byte, the pictures of converting the upright, composited pixels themselves.
    upright = np.rot90(decode_image(with_orientation("JPEG", 6)), -1)
    a = ALPHA[..., None].astype(np.float64) / 255
    over = np.rint(RGB * a + 255 * (1 - a)).astype(np.uint8)
    upright = Image.fromarray(np.ascontiguousarray(upright))
    items = [Item("any/a_rotated.jpg", 0, data=encoded(upright, "PNG")),
             Item("any/b_transparent.png", 0, data=encoded(Image.fromarray(over), "PNG"))]  # fmt: skip
    want = reference(tmp_path, items, encoding=EncodeOptions(**FAST))
    got = pictures_by_name([out])
    assert got["any/a_rotated.jpg"] == want["any/a_rotated.jpg"]
    assert got["any/b_transparent.png"] == want["any/b_transparent.png"]
    assert main(["info", str(out)]) == 0
    assert (
        "  pictures  1 image with an EXIF orientation turned upright (--exif-transpose)"
        in capsys.readouterr().out
    )


def test_the_picture_options_are_part_of_what_a_resumed_conversion_checks(tmp_path, folder):
    out = tmp_path / "r" / "x.bzna"
    src = ImageFolderSource(folder)
    plain = EncodeOptions(**FAST)
    s = convert(src, out, encoding=plain, num_shards=2, workers=0, progress=False)
    assert len(s.written) == 2
    assert len(convert(src, out, encoding=plain, num_shards=2, workers=0, progress=False).finished) == 2
    for changed in (dict(exif_transpose=True), dict(alpha_background="white")):
        with pytest.raises(ConversionError, match="written by a conversion with other sources or options"):
            convert(
                src, out, encoding=EncodeOptions(**FAST, **changed), num_shards=2, workers=0, progress=False
            )
    # Left at their defaults, the new options leave the fingerprint as it was before they existed, so that
    # conversions begun then still resume.
    from bzna_tf.convert.plan import fingerprint

    class Before:
        settings = {
            k: v for k, v in plain.settings.items() if k not in ("exif_transpose", "alpha_background")
        }

    assert fingerprint(src, plain) == fingerprint(src, Before())
    turned = EncodeOptions(**FAST, exif_transpose=True)
    convert(src, out, encoding=turned, num_shards=2, workers=0, progress=False, overwrite=True)
    again = convert(src, out, encoding=turned, num_shards=2, workers=0, progress=False)
    assert again.written == [] and len(again.finished) == 2


def _colour_blocks(h, w, seed):
    """Saturated colour blocks of odd sizes: the chroma edges where 4:2:0 upsampling differs most."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    cells = rng.integers(0, 256, (h // 5 + 1, w // 7 + 1, 3))
    return cells[yy // 5, xx // 7].astype(np.uint8)


@pytest.mark.parametrize("subsampling", [2, 1, 0], ids=["4:2:0", "4:2:2", "4:4:4"])
@pytest.mark.parametrize("h, w", [(37, 53), (40, 64)])
def test_a_jpeg_decodes_to_the_rgb_libjpeg_gives(subsampling, h, w):
    """The chroma of a subsampled JPEG is upsampled as libjpeg does (Pillow, tf.io.decode_jpeg, torchvision).

    FFmpeg's own RGB conversion of 4:2:0 and 4:2:2 planes was 24 to 28 dB from Pillow's on these
    pictures (36 dB on the fixture's hopper.jpg); what is left is the two decoders' IDCTs.
    """
    data = encoded(Image.fromarray(_colour_blocks(h, w, h + subsampling)), "JPEG", quality=95,
                   subsampling=subsampling)  # fmt: skip
    ours = decode_image(data).astype(np.float64)
    pillow = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.float64)
    psnr = 10 * np.log10(255.0**2 / np.mean((ours - pillow) ** 2))
    assert psnr > 45, f"{psnr:.1f} dB from Pillow's decode"
    assert np.abs(ours - pillow).max() <= 4


def test_jpeg_chroma_upsampling_is_the_loaders_bilinear_upsampling():
    """jpeg_ycbcr_to_rgb of 4:2:0 planes equals the loader's reconstruction (tests/_warp_reference.py)."""
    from _warp_reference import ref_yuv420

    from bzna_tf.convert.images import jpeg_ycbcr_to_rgb

    rng = np.random.default_rng(5)
    for h, w in [(7, 9), (301, 300), (1, 1), (2, 3), (600, 5)]:  # 600 rows: more than one strip
        y = rng.integers(0, 256, (h, w), dtype=np.uint8)
        cb, cr = rng.integers(0, 256, (2, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
        expected = ref_yuv420(*(p[None].astype(np.float32) for p in (y, cb, cr)), np.eye(3), (h, w))[0]
        np.testing.assert_array_equal(jpeg_ycbcr_to_rgb(y, cb, cr), expected)


def test_shards_an_earlier_version_decoded_otherwise_are_converted_again():
    from bzna_tf.convert.converter import DECODER_REVISION, _decoding_change

    today = {"exif_orientation": 1, "tiff_orientation": 0, "alpha": 0, "cmyk": 0, "high_bit_depth": 2}
    assert _decoding_change(today, []) == ""  # written by this version: its pictures decode the same
    earlier = {"exif_orientation": 0, "alpha": 3, "cmyk": 0, "high_bit_depth": 0}
    assert _decoding_change(earlier, [["a.png", "FFmpeg cannot decode it (...): JPEG data of 9 bytes"]]) == ""
    assert _decoding_change(None, []) == ""  # no facts (not ours): the fingerprint decides
    why = _decoding_change(
        {**earlier, "high_bit_depth": 2}, [["b.png", "...: PNG data of 90 bytes that ..."]]
    )
    assert why == (
        "an earlier bzna_tf converted it, and may have decoded its 2 pictures of more than 8 bits per "
        "channel (now reduced by their high byte) and 1 picture of PNG data it could not decode (some now "
        "decode) otherwise"
    )
    # Revision 1 (recorded, or told by its tiff_orientation fact) kept YCCK JPEGs named C, M, Y, K as CMYK.
    cmyk = {**today, "cmyk": 2}
    for revision in (None, 1):
        assert _decoding_change(cmyk, [], revision) == (
            "an earlier bzna_tf converted it, and may have decoded its 2 pictures in CMYK (a YCCK JPEG's "
            "colours are now kept) otherwise"
        )
    assert _decoding_change(cmyk, [], DECODER_REVISION) == ""
    assert _decoding_change({**today, "high_bit_depth": 3}, [], 1) == ""  # changed before revision 1


def test_a_shard_of_an_earlier_decoder_revision_with_cmyk_pictures_is_converted_again(tmp_path, monkeypatch):
    from bzna_tf.convert import converter

    for folder, names in (("plain", ["plain.jpg"]), ("mixed", ["plain.jpg", "print.jpg"])):
        (tmp_path / folder / "any").mkdir(parents=True)
        for name in names:
            picture = Image.fromarray(RGB).convert("CMYK" if name == "print.jpg" else "RGB")
            (tmp_path / folder / "any" / name).write_bytes(encoded(picture, "JPEG", quality=95))

    def convert(folder):
        out = tmp_path / f"{folder}.bzna"
        assert main(["convert", "folder", str(tmp_path / folder), str(out), "--quality", "quick"]) == 0
        with BznaFile(str(out)) as f:
            return f.metadata["conversion"]["decoder"]

    today = converter.DECODER_REVISION
    monkeypatch.setattr(converter, "DECODER_REVISION", today - 1)  # as the revision before wrote them
    assert convert("plain") == convert("mixed") == today - 1
    monkeypatch.setattr(converter, "DECODER_REVISION", today)
    assert convert("plain") == today - 1  # no CMYK picture: it decodes the same, and is kept
    assert convert("mixed") == today  # converted again


@pytest.mark.parametrize("header", [b"P6 24 24 255\n", b"P6\n24 24\n255\n", b"P6\t24\r\n24  255 "])
def test_a_ppm_decodes_whatever_whitespace_its_header_has(header):
    # FFmpeg's probe took a Netpbm header only with a newline after the magic: "P6 24 24 255" (one line, as
    # Netpbm allows and many writers emit) was "neither JPEG nor PNG".
    rgb = gradient(24, 24)
    out, _ = decode_picture(header + rgb.tobytes())
    assert np.array_equal(out, rgb)
    grey, _ = decode_picture(b"P5 24 24 255\n" + rgb[..., 1].tobytes())
    assert np.array_equal(grey, np.repeat(rgb[..., 1:2], 3, axis=2))
    with pytest.raises(ImageDecodeError, match=r"PPM data of 20 bytes"):
        decode_picture(b"P6 24 24 255\n" + bytes(7))  # short: named as what it is
