"""Decoding source images (JPEG, PNG, ...) to RGB with FFmpeg, through PyAV, and what decoding does to them.

The pixels stored are the ones the file holds, as TensorFlow's ``decode_image``,
Keras' ``load_img`` and torchvision's ``decode_image`` give them: an EXIF
orientation is not applied, an alpha channel is dropped (the colour under a
transparent pixel is kept), CMYK is converted to RGB and more than 8 bits per
channel are reduced to 8 (the high byte, as TensorFlow's ``convert_image_dtype``
and Pillow keep it). A TIFF is turned upright as its orientation tag says, as
Pillow (torchvision's decoder; TensorFlow and Keras read no TIFF) opens it.
The chroma of a 4:2:0 or 4:2:2 JPEG is upsampled as libjpeg does it, and a
lossy WebP's as libwebp does (:func:`jpeg_ycbcr_to_rgb`), so that its RGB is
the one those libraries decode.
:func:`decode_picture` says which of these happened to a picture, and can turn
it upright (``exif_transpose``) or composite it over a colour
(``alpha_background``) instead.

A picture's size is read from its file's header before anything is decoded,
and one over ``max_pixels`` (default :data:`DEFAULT_MAX_PIXELS`) is refused
without decoding it: a PNG of a few hundred kB can declare a picture of
gigabytes (a decompression bomb).
"""

from __future__ import annotations

import contextlib
import io
import struct
import threading

import numpy as np

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "PICTURE_FACTS",
    "ImageDamagedError",
    "ImageDecodeError",
    "ImageTooLargeError",
    "alpha_background_color",
    "decode_image",
    "decode_picture",
    "image_size",
    "jpeg_ycbcr_to_rgb",
]

_JPEG_MAGIC = b"\xff\xd8"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_TIFF_MAGICS = (b"II*\0", b"MM\0*")
PICTURE_FACTS = ("exif_orientation", "tiff_orientation", "alpha", "cmyk", "high_bit_depth", "repaired")
"""What :func:`decode_picture` reports, when it applies to a picture:

- ``"exif_orientation"``: the EXIF orientation (2 .. 8: rotated or mirrored; 1 and none are not reported)
  of a JPEG, PNG or WebP;
- ``"tiff_orientation"``: a TIFF's orientation tag (2 .. 8), which the picture was turned upright by;
- ``"alpha"``: True when the picture has transparent pixels (an alpha channel or a palette's
  transparency below full opacity somewhere);
- ``"cmyk"``: True for a CMYK (or YCCK) JPEG or TIFF, converted to RGB;
- ``"high_bit_depth"``: the bits per channel when more than 8 (16-bit PNG or TIFF), reduced to 8;
- ``"repaired"``: True for a picture the decoder reported errors in and concealed them
  (``lenient=True`` only; otherwise such a picture is an error).
"""
DEFAULT_MAX_PIXELS = 89_478_485
"""The largest picture decoded by default, in pixels (width x height): Pillow's own limit
(``Image.MAX_IMAGE_PIXELS``), as 9459 x 9459 or 12000 x 7456.

The pictures of image datasets are far smaller (ImageNet's average about
470 x 390, a 50-megapixel camera's 8688 x 5792). Converting a picture takes
about 43 bytes per pixel in its worker (decoding, 4:2:0 conversion and x265),
so this limit keeps a worker under about 4 GB. x265 cannot encode a frame of
more than 142,606,336 pixels (H.265 level 7.2) in any case.
"""
# FFmpeg's own check of a decoder's frame (its `max_pixels` option) counts each row rounded up to its
# buffer alignment (up to 64 pixels): the limit given to it leaves that much room on pictures of up to
# 65536 rows, so that it refuses only what the exact check after decoding would refuse anyway.
_FFMPEG_ROW_SLACK = 64 * 65536
_NAMED_COLORS = {
    "white": (255, 255, 255),
    "black": (0, 0, 0),
    "grey": (128, 128, 128),
    "gray": (128, 128, 128),
}
# JPEG start-of-frame markers (every coding process): they give the number of components.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_TAG_ORIENTATION, _TAG_PHOTOMETRIC = 0x0112, 0x0106
_TAG_WIDTH, _TAG_LENGTH = 0x0100, 0x0101
_TAG_COMPRESSION = 0x0103
# TIFF compressions that FFmpeg's TIFF decoder turns into a black picture without an error: JPEG (old-style
# 6, and 7 as libtiff and Pillow write it; FFmpeg decodes 7 only inside DNG files).
_TIFF_BLACK = {6: "old-style JPEG", 7: "JPEG"}
_PHOTOMETRIC_SEPARATED = 5  # TIFF's CMYK
# FFmpeg's JPEG frames whose chroma jpeg_ycbcr_to_rgb upsamples: (horizontal, vertical) factor.
_JPEG_SUBSAMPLED = {"yuvj420p": (2, 2), "yuvj422p": (2, 1)}
# FFmpeg's frames of a lossy WebP (VP8: limited-range BT.601 4:2:0, with or without its alpha plane).
_WEBP_PLANES = ("yuv420p", "yuva420p")
# Rows converted at a time: the float32 temporaries stay a few MB whatever the picture's size.
_STRIP_ROWS = 256


class ImageDecodeError(ValueError):
    """A source image that cannot be decoded; the message says why."""


class ImageDamagedError(ImageDecodeError):
    """A source image its decoder reported damage in (``lenient`` keeps it as decoded, ``"repaired"``)."""


class ImageTooLargeError(ImageDecodeError):
    """A source image over the pixel limit: refused before decoding when its header says its size, else after.

    Attributes:
      size: its (width, height).
      max_pixels: the limit it is over.
    """

    def __init__(self, size, max_pixels):
        self.size, self.max_pixels = tuple(size), max_pixels
        w, h = self.size
        pixels = f"{w * h / 1e6:.1f} M" if w * h >= 1_000_000 else f"{w * h:,}"
        super().__init__(f"{w} x {h} = {pixels} pixels, over the limit of {max_pixels:,} pixels")


def _what(data: bytes) -> str:
    """What the bytes look like, for an error message: the format by its magic, the size, the ends."""
    if data.startswith(_JPEG_MAGIC):
        end = "ends with an" if data.rstrip(b"\0").endswith(b"\xff\xd9") else "has no"
        return f"JPEG data of {len(data)} bytes that {end} end-of-image marker (FF D9)"
    if data.startswith(_PNG_MAGIC):
        end = "ends with an" if b"IEND" in data[-16:] else "has no"
        return f"PNG data of {len(data)} bytes that {end} IEND chunk"
    kind = _format_name(data)
    if kind is not None:
        return f"{kind} data of {len(data)} bytes"
    return f"{len(data)} bytes starting {data[:16]!r} (neither JPEG nor PNG)"


def _format_name(data: bytes) -> str | None:
    """The name of a (non-JPEG, non-PNG) image format by its magic, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        animated = data[12:16] == b"VP8X" and len(data) > 20 and data[20] & 0x02
        return "animated WebP" if animated else "WebP"
    if data[:4] in _TIFF_MAGICS:
        return "TIFF"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:2] == b"BM":
        return "BMP"
    if _pnm_demuxer(data) is not None:
        return _PNM[data[1:2]][0]
    return None


# Netpbm's magics -> (the format's name, FFmpeg's demuxer for it).
_PNM = {
    b"1": ("PBM", "pbm_pipe"),
    b"4": ("PBM", "pbm_pipe"),
    b"2": ("PGM", "pgm_pipe"),
    b"5": ("PGM", "pgm_pipe"),
    b"3": ("PPM", "ppm_pipe"),
    b"6": ("PPM", "ppm_pipe"),
    b"7": ("PAM", "pam_pipe"),
}


def _pnm_demuxer(data: bytes) -> str | None:
    """FFmpeg's demuxer for Netpbm data (P1-P7, then whitespace), else None. FFmpeg's own probe takes
    such data only with a newline after the magic; a header on one line ("P6 24 24 255"), which Netpbm
    allows, would not be recognised."""
    if data[:1] == b"P" and data[1:2] in _PNM and data[2:3] in (b" ", b"\t", b"\n", b"\r", b"\v", b"\f"):
        return _PNM[data[1:2]][1]
    return None


def is_jpeg_or_png(data: bytes) -> bool:
    """Whether the bytes are JPEG or PNG: decoded by FFmpeg's decoder directly (and ``lenient`` can
    keep such a picture it repaired)."""
    return data.startswith(_JPEG_MAGIC) or data.startswith(_PNG_MAGIC)


def unsupported_hint(data: bytes) -> str | None:
    """What to do with an image FFmpeg cannot decode whose format has features it lacks, or None."""
    kind = _format_name(data)
    if kind == "animated WebP":
        return "animated WebP is not read: save its first frame as a still image (PNG or WebP) first"
    if kind == "TIFF" and _tiff_tags(data, {_TAG_COMPRESSION}).get(_TAG_COMPRESSION) in _TIFF_BLACK:
        return "save it as PNG or JPEG first (FFmpeg decodes JPEG-compressed TIFF only inside DNG files)"
    if kind == "TIFF":
        return (
            "if the file is whole, FFmpeg's TIFF decoder may lack its sample format (it reads 8- and "
            "16-bit integers, not floating point) or compression: save it as PNG first"
        )
    return None


_PNG_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")


def _png_chunks(data: bytes):
    """(kind, start, end) of a PNG's chunks, whole (length, kind, body, CRC), up to its IEND; none past a
    chunk cut short."""
    i = 8
    while i + 12 <= len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        kind, end = data[i + 4 : i + 8], i + 12 + length
        if end > len(data):
            return
        yield kind, i, end
        if kind == b"IEND":
            return
        i = end


def _without_text_chunks(data: bytes) -> bytes:
    """A PNG without its text chunks (tEXt, zTXt, iTXt): they hold no pixels, and FFmpeg's decoder
    refuses some that Pillow and TensorFlow read (ImageMagick's "Raw profile type exif")."""
    out, last = [data[:8]], 8
    for kind, start, end in _png_chunks(data):
        if kind not in _PNG_TEXT_CHUNKS:
            out.append(data[start:end])
        last = end
        if kind == b"IEND":
            return b"".join(out)
    out.append(data[last:])  # damaged or cut short: as it is, for the decoder to report
    return b"".join(out)


_RAW_EXIF_KEY = b"Raw profile type exif"


def _raw_profile_exif(kind: bytes, body: bytes) -> bytes | None:
    """The EXIF of an ImageMagick "Raw profile type exif" text chunk (as Pillow reads it), or None."""
    import zlib

    if not body.startswith(_RAW_EXIF_KEY + b"\0"):
        return None
    text = body[len(_RAW_EXIF_KEY) + 1 :]
    try:
        if kind == b"zTXt":
            text = zlib.decompressobj().decompress(text[1:], 1 << 20)
        elif kind == b"iTXt":
            flag, rest = text[0], text[2:]
            rest = rest.split(b"\0", 2)[-1]  # past the language tag and the translated keyword
            text = zlib.decompressobj().decompress(rest, 1 << 20) if flag else rest
        exif = bytes.fromhex("".join(text.decode("latin-1").split("\n")[3:]))
    except (zlib.error, ValueError, IndexError):
        return None
    return exif[6:] if exif.startswith(b"Exif\0\0") else exif


def alpha_background_color(value) -> tuple[int, int, int] | None:
    """``"white"``, ``"black"``, ``"grey"``, ``"#RRGGBB"``, ``"R,G,B"`` or (R, G, B) in [0, 255] -> (R, G, B).

    None stays None (no compositing).

    Raises:
      ValueError: anything else, saying what is accepted.
    """
    if value is None:
        return None
    rgb = None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _NAMED_COLORS:
            rgb = _NAMED_COLORS[text]
        elif len(text) == 7 and text.startswith("#"):
            try:
                rgb = tuple(int(text[k : k + 2], 16) for k in (1, 3, 5))
            except ValueError:
                rgb = None
        elif text.count(",") == 2:
            try:
                rgb = tuple(int(part) for part in text.split(","))
            except ValueError:
                rgb = None
    elif isinstance(value, (tuple, list)) and len(value) == 3:
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            rgb = tuple(int(v) for v in value)
    if rgb is None or not all(0 <= v <= 255 for v in rgb):
        raise ValueError(
            "Expected `alpha_background` as a colour: 'white', 'black', 'grey', '#RRGGBB', 'R,G,B' or "
            f"(R, G, B), values in [0, 255]. Received: alpha_background={value!r}"
        )
    return rgb


def _tiff_tags(tiff: bytes, wanted) -> dict:
    """{tag: value} of the SHORT or LONG tags in ``wanted`` of a TIFF structure's first IFD (EXIF's too)."""
    if tiff[:4] not in _TIFF_MAGICS:
        return {}
    e = "<" if tiff[:2] == b"II" else ">"
    (first,) = struct.unpack(e + "I", tiff[4:8])
    if first + 2 > len(tiff):
        return {}
    (n,) = struct.unpack(e + "H", tiff[first : first + 2])
    out = {}
    for k in range(min(n, 4096)):
        entry = tiff[first + 2 + 12 * k : first + 14 + 12 * k]
        if len(entry) < 12:
            break
        tag, kind = struct.unpack(e + "HH", entry[:4])
        if tag in wanted and kind == 3:  # SHORT
            out[tag] = struct.unpack(e + "H", entry[8:10])[0]
        elif tag in wanted and kind == 4:  # LONG
            out[tag] = struct.unpack(e + "I", entry[8:12])[0]
    return out


def _exif_orientation(exif: bytes):
    if exif.startswith(b"Exif\0\0"):
        exif = exif[6:]
    return _tiff_tags(exif, {_TAG_ORIENTATION}).get(_TAG_ORIENTATION)


def _jpeg_segments(data: bytes):
    """(marker, segment) of a JPEG's header segments, up to its first scan (data past it is not read)."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker == 0xFF:  # a fill byte
            i += 1
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no header after it
            return
        if 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        yield marker, data[i + 4 : i + 2 + length]
        i += 2 + length


_CMYK_IDS = b"CMYK"


def _ycck_with_cmyk_ids_renamed(data: bytes) -> bytes:
    """A JPEG whose Adobe marker says YCCK (transform 2) but whose four components are named C, M, Y, K,
    with them renamed 1 .. 4 in its frame and every scan header; any other JPEG as it is.

    The Adobe transform decides the colour space for libjpeg (Pillow, TensorFlow); FFmpeg's decoder
    takes components named C, M, Y, K for CMYK whatever the marker says, and would store such a
    picture in wrong colours. Renaming them changes no pixel.
    """
    transform, frame = None, None
    for marker, segment in _jpeg_segments(data):
        if marker == 0xEE and segment.startswith(b"Adobe") and len(segment) >= 12:
            transform = segment[11]
        elif marker in _SOF and len(segment) >= 6:
            frame = segment
    if transform != 2 or frame is None or frame[5] != 4 or bytes(frame[6:18:3]) != _CMYK_IDS:
        return data
    rename = {c: k + 1 for k, c in enumerate(_CMYK_IDS)}
    out, i = bytearray(data), 2
    while i + 4 <= len(out):
        if out[i] != 0xFF:  # entropy-coded data: on to the next marker (0xFF00 is a stuffed byte)
            i = out.find(b"\xff", i)
            if i < 0:
                break
            continue
        marker = out[i + 1]
        if marker == 0xFF or marker == 0x00 or 0xD0 <= marker <= 0xD8 or marker == 0x01:
            i += 1 if marker == 0xFF else 2
            continue
        if marker == 0xD9:
            break
        (length,) = struct.unpack(">H", out[i + 2 : i + 4])
        body, end = i + 4, min(i + 2 + length, len(out))  # a file cut short: as far as it goes
        # Components: in a frame (their count at 5) id, sampling, table; in a scan (count at 0) id, tables.
        first, step, n = (body + 6, 3, body + 5) if marker in _SOF else (body + 1, 2, body)
        if (marker in _SOF or marker == 0xDA) and n < end:
            for at in range(first, min(first + step * out[n], end), step):
                out[at] = rename.get(out[at], out[at])
        i += 2 + length
    return bytes(out)


def _pnm_size(data: bytes):
    """(width, height) of a PBM/PGM/PPM (``P1`` .. ``P6``), PFM (``PF``, ``Pf``) or PAM (``P7``) header."""
    if data[1:2] == b"7":  # PAM: "WIDTH w" and "HEIGHT h" lines up to ENDHDR
        fields = {}
        for line in data[:4096].split(b"\n")[1:]:
            words = line.split()
            if words[:1] == [b"ENDHDR"]:
                break
            if len(words) == 2:
                fields[words[0]] = words[1]
        return int(fields[b"WIDTH"]), int(fields[b"HEIGHT"])
    tokens = []
    for line in data[2:4096].split(b"\n"):
        tokens += line.split(b"#")[0].split()
        if len(tokens) >= 2:
            return int(tokens[0]), int(tokens[1])
    raise ValueError("no size in the header")


def image_size(data: bytes) -> tuple[int, int] | None:
    """The (width, height) an image file declares in its header, read without decoding any pixel.

    Reads JPEG (its frame header), PNG (IHDR; APNG's canvas), GIF (the logical
    screen, which FFmpeg decodes every frame into), BMP, WebP (VP8, VP8L and
    VP8X's canvas), TIFF (the first image) and PBM/PGM/PPM/PAM/PFM headers.

    Returns:
      ``(width, height)``, or None for another format or a header that cannot
      be read (the decoder then says what is wrong; :func:`decode_picture`
      checks the size it decodes instead).
    """
    data = bytes(data)
    try:
        if data.startswith(_JPEG_MAGIC):
            for marker, segment in _jpeg_segments(data):
                if marker in _SOF and len(segment) >= 5:
                    h, w = struct.unpack(">HH", segment[1:5])
                    return (w, h) if h else None  # height 0: given after the first scan (DNL), rare
            return None
        if data.startswith(_PNG_MAGIC) and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:2] == b"BM":
            (header,) = struct.unpack("<I", data[14:18])
            if header == 12:  # OS/2 BITMAPCOREHEADER
                return struct.unpack("<HH", data[18:22])
            w, h = struct.unpack("<ii", data[18:26])
            return abs(w), abs(h)  # a negative height: rows stored top-down
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            kind, body = data[12:16], data[20:30]
            if kind == b"VP8X":
                w, h = (int.from_bytes(body[k : k + 3], "little") + 1 for k in (4, 7))
                return w, h
            if kind == b"VP8L" and body[:1] == b"\x2f":
                (bits,) = struct.unpack("<I", body[1:5])
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if kind == b"VP8 " and body[3:6] == b"\x9d\x01\x2a":
                w, h = struct.unpack("<HH", body[6:10])
                return w & 0x3FFF, h & 0x3FFF
            return None
        if data[:4] in _TIFF_MAGICS:
            tags = _tiff_tags(data, {_TAG_WIDTH, _TAG_LENGTH})
            if _TAG_WIDTH in tags and _TAG_LENGTH in tags:
                return tags[_TAG_WIDTH], tags[_TAG_LENGTH]
            return None
        if data[:1] == b"P" and data[1:2] in b"1234567Ff" and data[2:3].isspace():
            return _pnm_size(data)
    except (struct.error, ValueError, KeyError):
        return None
    return None


def _header_facts(data: bytes) -> tuple:
    """(EXIF orientation or None, CMYK or not) read from the file's own structure (FFmpeg does not say).

    A header that cannot be parsed gives (None, False): the decoder reports real damage.
    """
    orientation, cmyk = None, False
    try:
        if data.startswith(_JPEG_MAGIC):
            for marker, segment in _jpeg_segments(data):
                if marker == 0xE1 and segment.startswith(b"Exif\0\0") and orientation is None:
                    orientation = _exif_orientation(segment)
                elif marker in _SOF and len(segment) > 5:
                    cmyk = segment[5] == 4  # four components: CMYK, or YCCK (Adobe)
        elif data.startswith(_PNG_MAGIC):
            raw = None
            for kind, start, end in _png_chunks(data):
                if kind == b"eXIf":
                    orientation = _exif_orientation(data[start + 8 : end - 4])
                    break
                if kind in _PNG_TEXT_CHUNKS and raw is None:
                    raw = _raw_profile_exif(kind, data[start + 8 : end - 4])
            if orientation is None and raw:  # Pillow reads ImageMagick's text chunk when there is no eXIf
                orientation = _exif_orientation(raw)
        elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            i = 12
            while i + 8 <= len(data):
                kind = data[i : i + 4]
                (length,) = struct.unpack("<I", data[i + 4 : i + 8])
                if kind == b"EXIF":
                    orientation = _exif_orientation(data[i + 8 : i + 8 + length])
                    break
                i += 8 + length + (length & 1)
        elif data[:4] in _TIFF_MAGICS:
            tags = _tiff_tags(data, {_TAG_ORIENTATION, _TAG_PHOTOMETRIC})
            orientation = tags.get(_TAG_ORIENTATION)
            cmyk = tags.get(_TAG_PHOTOMETRIC) == _PHOTOMETRIC_SEPARATED
    except struct.error:
        return None, False
    return (orientation if orientation in range(2, 9) else None), cmyk


def exif_transposed(rgb: np.ndarray, orientation: int) -> np.ndarray:
    """``rgb`` (H, W, C) turned upright as EXIF orientation 1 .. 8 says (as Pillow's ``exif_transpose``)."""
    turn = {
        2: lambda a: a[:, ::-1],
        3: lambda a: a[::-1, ::-1],
        4: lambda a: a[::-1],
        5: lambda a: a.transpose(1, 0, 2),
        6: lambda a: np.rot90(a, -1),
        7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),
        8: lambda a: np.rot90(a, 1),
    }.get(orientation)
    return rgb if turn is None else np.ascontiguousarray(turn(rgb))


def _centred_taps(first: int, stop: int, m: int):
    """For outputs ``first`` .. ``stop - 1`` over ``m`` chroma samples: the nearer sample and the next one.

    Output i sits at chroma position i/2 - 1/4: nearer sample i // 2, the
    next one on the side i lies (i - 1 for even i, i + 1 for odd), clamped.
    """
    i = np.arange(first, stop)
    near = i // 2
    return near, np.clip(near + np.where(i % 2 == 0, -1, 1), 0, m - 1)


def jpeg_ycbcr_to_rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, *, limited: bool = False) -> np.ndarray:
    """RGB of a JPEG's full-range BT.601 planes, the chroma upsampled as libjpeg does ("fancy" upsampling).

    Each output pixel takes 3/4 of the chroma sample nearest it and 1/4 of
    the next one, on each subsampled axis (the triangle filter of chroma
    sited between luma pixels, edges repeated): the RGB that libjpeg-turbo,
    and so Pillow and ``tf.io.decode_jpeg``, give. FFmpeg's own conversion of
    the same planes is 36 to 47 dB away from it on the fixture's 4:2:0
    photographs; this, 52 dB and more (the rest is the two decoders' IDCTs).
    It is also the bilinear upsampling the loader applies to stored chroma.

    Args:
      y: (H, W) uint8 luma.
      cb, cr: uint8 chroma, (ceil(H/v), ceil(W/h)) for a subsampling (h, v), each 1 or 2.
      limited: the planes are limited-range (luma 16-235, chroma 16-240), as
        a lossy WebP's (VP8) are: the same conversion after scaling them to
        full range, which gives the RGB that libwebp (Pillow, TensorFlow)
        does within 2 levels (FFmpeg's own conversion: 100 levels away at
        sharp colour edges, about 1 level darker on average).

    Returns:
      (H, W, 3) uint8.
    """
    h, w = y.shape
    quarter, three_quarters, half = np.float32(0.25), np.float32(0.75), np.float32(0.5)
    # Full range: as they are. Limited range: luma from 16..235, chroma from 16..240, to 0..255.
    lum_scale = np.float32(255 / 219 if limited else 1)
    lum_zero = np.float32(16 if limited else 0)
    chroma_scale = np.float32(255 / 224 if limited else 1)
    if cb.shape[1] < w:
        near_x, far_x = _centred_taps(0, w, cb.shape[1])
    out = np.empty((h, w, 3), np.uint8)
    for top in range(0, h, _STRIP_ROWS):
        rows = slice(top, min(h, top + _STRIP_ROWS))
        planes = []
        for c in (cb, cr):
            if c.shape[0] < h:
                near, far = _centred_taps(rows.start, rows.stop, c.shape[0])
                c = three_quarters * c[near].astype(np.float32) + quarter * c[far]
            else:
                c = c[rows].astype(np.float32)
            if c.shape[1] < w:
                c = three_quarters * c[:, near_x] + quarter * c[:, far_x]
            planes.append((c - np.float32(128)) * chroma_scale)
        u, v = planes
        lum = (y[rows].astype(np.float32) - lum_zero) * lum_scale
        red = lum + np.float32(1.402) * v
        green = lum - np.float32(0.344136) * u - np.float32(0.714136) * v
        blue = lum + np.float32(1.772) * u
        for k, channel in enumerate((red, green, blue)):
            out[rows, :, k] = np.clip(np.floor(channel + half), 0, 255)
    return out


def _frame_rgb(frame, jpeg: bool, bits: int, webp: bool = False) -> np.ndarray:
    """A decoded frame as (H, W, 3) uint8: a subsampled JPEG's or lossy WebP's through
    :func:`jpeg_ycbcr_to_rgb`, more than 8 bits per channel by their high byte (FFmpeg's own reduction
    dithers, and differs from grey to colour)."""
    name = frame.format.name
    if bits > 8:
        return (frame.to_ndarray(format="rgb48le") >> 8).astype(np.uint8)
    limited = webp and name in _WEBP_PLANES
    if not (jpeg and name in _JPEG_SUBSAMPLED) and not limited:
        return frame.to_ndarray(format="rgb24")
    h, w = frame.height, frame.width
    sx, sy = (2, 2) if limited else _JPEG_SUBSAMPLED[name]
    planes = []
    chroma = (-(-h // sy), -(-w // sx))
    for plane, (ph, pw) in zip(frame.planes[:3], ((h, w), chroma, chroma), strict=True):  # Y, U, V (not A)
        rows = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)
        planes.append(rows[:ph, :pw])
    return jpeg_ycbcr_to_rgb(*planes, limited=limited)


def check_max_pixels(max_pixels) -> None:
    """Raises ValueError unless ``max_pixels`` is None (no limit) or an integer >= 1."""
    if max_pixels is not None and (
        isinstance(max_pixels, bool) or not isinstance(max_pixels, (int, np.integer)) or max_pixels < 1
    ):
        raise ValueError(
            "Expected `max_pixels` as an integer >= 1, or None for no limit. "
            f"Received: max_pixels={max_pixels!r}"
        )


_LOG_LOCK = threading.Lock()
_log_users, _log_saved = 0, None  # the threads in _decoder_errors, and PyAV's log state before the first


@contextlib.contextmanager
def _decoder_errors():
    """Collects the error messages FFmpeg logs in this thread meanwhile (a list of str, filled on exit).

    FFmpeg passes no message to Python by default (PyAV's level is None): the
    level is ERROR meanwhile, and what is logged is captured, not printed.
    """
    import av.logging

    global _log_users, _log_saved
    errors = []
    with _LOG_LOCK:  # threads decoding at once: the first sets PyAV's state, the last puts it back
        if _log_users == 0:
            _log_saved = av.logging.get_level(), av.logging.get_skip_repeated()
            av.logging.set_level(av.logging.ERROR)
            # The next damaged file's message is the same as the last one's: none is skipped.
            av.logging.set_skip_repeated(False)
        _log_users += 1
    try:
        with av.logging.Capture(local=True) as logs:
            yield errors
    finally:
        with _LOG_LOCK:
            _log_users -= 1
            if _log_users == 0:
                av.logging.set_level(_log_saved[0])
                av.logging.set_skip_repeated(_log_saved[1])
        errors.extend(
            f"{name}: {message.strip()}" if name else message.strip()
            for lvl, name, message in logs
            if lvl <= av.logging.ERROR
        )


def decode_picture(
    data: bytes,
    *,
    lenient: bool = False,
    exif_transpose: bool = False,
    alpha_background=None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
):
    """Decodes an encoded image to RGB, (H, W, 3) uint8, and says what decoding did to it.

    JPEG and PNG go straight to FFmpeg's decoder; other formats (BMP, GIF,
    WebP, TIFF, ...) through its image demuxer. Grey, palette, 4:2:2/4:4:4,
    CMYK, 16-bit and alpha images come out as plain RGB. By default the
    stored pixels are the file's, as TensorFlow, Keras and torchvision decode
    them: an EXIF orientation is not applied and the alpha channel is dropped
    (the colour under a transparent pixel is kept). A TIFF is turned upright
    by its orientation tag, as Pillow (torchvision) opens it.

    Args:
      data: the file's bytes.
      lenient: accept pictures the decoder had to conceal errors in, as it
        concealed them (the rows a truncated JPEG lacks come out as FFmpeg
        leaves them: green, its zeroed YCbCr; a TIFF strip that does not
        decompress: black), reported as ``"repaired"``. By default any
        decoding error is raised (an error FFmpeg's decoder logs too:
        :class:`ImageDamagedError`), so a damaged image is reported instead
        of stored damaged. A JPEG-compressed TIFF, which FFmpeg decodes to
        black, is refused either way.
      exif_transpose: turn a picture with an EXIF orientation upright (rotated
        or mirrored as the orientation says), as Pillow's ``exif_transpose``.
      alpha_background: composite a picture with transparent pixels over this
        colour (see :func:`alpha_background_color`) instead of dropping its alpha.
      max_pixels: refuse a picture of more pixels (width x height) than this,
        before decoding it when its header says its size (:func:`image_size`);
        FFmpeg is given the limit too, so no format decodes much more. None: no
        limit (FFmpeg's own is about 268 M pixels).

    Returns:
      ``(rgb, facts)``: the picture and a dict with the keys of
      :data:`PICTURE_FACTS` that apply to it (the orientation and bit depth as
      numbers, the others True), empty for a plain 8-bit RGB picture.

    Raises:
      ImageTooLargeError: a picture over ``max_pixels`` (an :class:`ImageDecodeError`).
      ImageDamagedError: FFmpeg's decoder reported damage (an :class:`ImageDecodeError`).
      ImageDecodeError: undecodable data, with FFmpeg's reason.
      ValueError: an ``alpha_background`` that is not a colour, a bad ``max_pixels``.
    """
    import av  # the format layer never needs FFmpeg

    background = alpha_background_color(alpha_background)
    check_max_pixels(max_pixels)
    data = bytes(data)
    if not data:
        raise ImageDecodeError("no bytes (an empty file, or an empty image feature or member)")
    size = image_size(data)
    if max_pixels is not None and size is not None and size[0] * size[1] > max_pixels:
        raise ImageTooLargeError(size, max_pixels)
    kind = _format_name(data)
    if kind == "animated WebP":
        # FFmpeg 9 (PyAV 19's) decodes one of its frames, FFmpeg 8 and earlier none: refused whatever
        # the FFmpeg, so that a conversion does not depend on PyAV's version.
        raise ImageDecodeError(f"an image of several frames: {_what(data)}")
    # FFmpeg refuses larger frames before allocating them: the formats whose size is not read above
    # (and headers FFmpeg reads otherwise) are bounded too. Its probe of a container decodes a frame.
    limit = {} if max_pixels is None else {"max_pixels": str(int(max_pixels) + _FFMPEG_ROW_SLACK)}
    facts = {}
    try:
        if is_jpeg_or_png(data):
            codec = "mjpeg" if data.startswith(_JPEG_MAGIC) else "png"
            packet = _ycck_with_cmyk_ids_renamed(data) if codec == "mjpeg" else _without_text_chunks(data)

            def decode(options):
                ctx = av.CodecContext.create(codec, "r")
                ctx.thread_count = 1
                ctx.options = options
                return ctx.decode(av.Packet(packet)) + ctx.decode(None)

            # Its errors raise (err_detect): what it logs meanwhile is heard, not printed, as below.
            with _decoder_errors():
                try:
                    frames = decode({**limit, "err_detect": "explode"})
                except av.FFmpegError:
                    if not lenient:
                        raise
                    frames = decode(limit)  # concealed: a picture, with the damage the decoder made up
                    facts["repaired"] = True
        else:
            compression = _tiff_tags(data, {_TAG_COMPRESSION}).get(_TAG_COMPRESSION)
            if compression in _TIFF_BLACK:
                raise ImageDecodeError(
                    f"a {_TIFF_BLACK[compression]}-compressed TIFF (compression {compression}), which "
                    f"FFmpeg's TIFF decoder turns into a black picture: {_what(data)}"
                )
            demuxer = _pnm_demuxer(data)  # None: FFmpeg's probe tells the format
            with (
                _decoder_errors() as errors,
                av.open(io.BytesIO(data), format=demuxer, options=limit) as container,
            ):
                stream = container.streams.video[0]
                # One thread: every message is logged in this one, which _decoder_errors hears.
                stream.codec_context.thread_count = 1
                # FFmpeg's GIF decoder paints transparent pixels white by default; black is what
                # TensorFlow's (and so Keras') decoder gives them.
                gif = {"trans_color": "0"} if stream.codec_context.name == "gif" else {}
                stream.codec_context.options = {**limit, **gif}
                frames = [next(container.decode(stream), None)]
            # The image demuxer's decoders (TIFF's strips, ...) report damage only in their log, and
            # return the picture with what they could not decode left black.
            if errors:
                if not lenient:
                    raise ImageDamagedError(f"FFmpeg's decoder reported damage ({errors[0]}): {_what(data)}")
                facts["repaired"] = True
        frame = next((f for f in frames if f is not None), None)
        if frame is None:
            raise ImageDecodeError("the decoder returned no picture")
        if max_pixels is not None and frame.width * frame.height > max_pixels:
            raise ImageTooLargeError((frame.width, frame.height), max_pixels)
        bits = max(c.bits for c in frame.format.components)
        rgb = _frame_rgb(frame, data.startswith(_JPEG_MAGIC), bits, webp=kind == "WebP")
        if bits > 8:
            facts["high_bit_depth"] = bits
        if frame.format.has_palette or any(c.is_alpha for c in frame.format.components):
            rgba = frame.to_ndarray(format="rgba64le" if bits > 8 else "rgba")
            top = 65535 if bits > 8 else 255
            if rgba[..., 3].min() < top:
                facts["alpha"] = True
                if background is not None:
                    a = rgba[..., 3:].astype(np.float32) / top
                    # The colours as converted above (a lossy WebP's as libwebp gives them; 16 bits: the
                    # high byte), the alpha from FFmpeg's RGBA.
                    over = rgb.astype(np.float32) * a + np.float32(background) * (1 - a)
                    rgb = np.clip(np.rint(over), 0, 255).astype(np.uint8)
    except ImageDecodeError:
        raise
    except (av.FFmpegError, ValueError, StopIteration, IndexError) as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        if limit and isinstance(e, av.ArgumentError):  # what FFmpeg says of a frame over its max_pixels too
            why += f", which is also what it says of a picture over the limit of {max_pixels:,} pixels"
        raise ImageDecodeError(f"FFmpeg cannot decode it ({why}): {_what(data)}") from e
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape:
        raise ImageDecodeError(f"decoded to an unexpected shape {rgb.shape}")
    orientation, cmyk = _header_facts(data)
    if cmyk:
        facts["cmyk"] = True
    if orientation is not None:
        tiff = data[:4] in _TIFF_MAGICS  # part of the raster's definition, applied by Pillow's TIFF reader
        facts["tiff_orientation" if tiff else "exif_orientation"] = orientation
        if exif_transpose or tiff:
            rgb = exif_transposed(rgb, orientation)
    return rgb, facts


def decode_image(
    data: bytes,
    *,
    lenient: bool = False,
    exif_transpose: bool = False,
    alpha_background=None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
):
    """Decodes an encoded image to RGB, (H, W, 3) uint8: :func:`decode_picture` without its facts.

    Args:
      data, lenient, exif_transpose, alpha_background, max_pixels: as for :func:`decode_picture`.

    Raises:
      ImageDecodeError: undecodable data, with FFmpeg's reason, or a picture over ``max_pixels``.
    """
    return decode_picture(
        data,
        lenient=lenient,
        exif_transpose=exif_transpose,
        alpha_background=alpha_background,
        max_pixels=max_pixels,
    )[0]
