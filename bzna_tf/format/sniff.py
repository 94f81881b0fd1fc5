"""What a file that is not a .bzna seems to be, judged from its first bytes.

A .bzna starts with an ``ftyp`` box (``size``, ``"ftyp"``, major brand
``isom``, compatible brands ``bzna`` and ``isom``). A file that does not is
refused before any box is parsed, with a message that says so and, when the
first bytes match a known signature, what the file looks like::

    photo.bzna, byte offset 0: not a .bzna file: it looks like a JPEG image (expected an 'ftyp' box
    first, the file starts with '\\xff\\xd8\\xff\\xe0\\x00\\x10JF')

The C++ reader (``custom_ops/lib/bzna_format.cc``, ``NotBznaReason``) applies
the same table to the same bytes and words its errors alike; the tests check
both against every entry of :data:`SIGNATURES`.
"""

from __future__ import annotations

import os
import struct

from bzna_tf.format.crc import masked_crc32c

__all__ = ["SIGNATURES", "SNIFF_BYTES", "convert_hint", "not_bzna_reason", "printable", "read_head", "sniff"]

# How many leading bytes sniff() looks at (tar's "ustar" is at 257).
SNIFF_BYTES = 512

# (((offset, magic), ...), what the file looks like): every (offset, magic) must match.
SIGNATURES: tuple[tuple[tuple[tuple[int, bytes], ...], str], ...] = (
    (((0, b"\xff\xd8\xff"),), "a JPEG image"),
    (((0, b"\x89PNG\r\n\x1a\n"),), "a PNG image"),
    (((0, b"GIF87a"),), "a GIF image"),
    (((0, b"GIF89a"),), "a GIF image"),
    (((0, b"RIFF"), (8, b"WEBP")), "a WebP image"),
    (((0, b"RIFF"), (8, b"AVI ")), "an AVI video"),
    (((0, b"RIFF"), (8, b"WAVE")), "a WAV audio file"),
    (((0, b"II*\x00"),), "a TIFF image"),
    (((0, b"MM\x00*"),), "a TIFF image"),
    (((0, b"\x00\x00\x00\x0cjP  \r\n\x87\n"),), "a JPEG 2000 image"),
    (((0, b"\x00\x00\x00\x0cJXL \r\n\x87\n"),), "a JPEG XL image"),
    (((0, b"\xff\x0a"),), "a JPEG XL image"),
    (((0, b"\x00\x00\x00\x01\x40\x01"),), "an H.265 stream (Annex-B)"),
    (((0, b"\x1aE\xdf\xa3"),), "a Matroska or WebM video"),
    (((0, b"PK\x03\x04"),), "a zip archive"),
    (((0, b"PK\x05\x06"),), "a zip archive"),
    (((0, b"\x1f\x8b"),), "a gzip file"),
    (((0, b"BZh"),), "a bzip2 file"),
    (((0, b"\xfd7zXZ\x00"),), "an xz file"),
    (((0, b"(\xb5/\xfd"),), "a zstd file"),
    (((0, b"7z\xbc\xaf\x27\x1c"),), "a 7-Zip archive"),
    (((257, b"ustar"),), "a tar archive"),
    (((0, b"\x93NUMPY"),), "a NumPy .npy file"),
    (((0, b"\x89HDF\r\n\x1a\n"),), "an HDF5 file"),
    (((0, b"SQLite format 3\x00"),), "an SQLite database"),
    (((0, b"%PDF-"),), "a PDF document"),
    (((0, b"\x7fELF"),), "an ELF executable or library"),
    (((0, b"version https://git-lfs.github.com/spec/"),), "a Git LFS pointer (run git lfs pull)"),
)

# ISO base media files (ftyp first) that are not .bzna, by brand. A .bzna lists
# the brand 'bzna'; a file listing neither it nor one of these is read on.
BRANDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("avif", "avis"), "an AVIF image"),
    (("heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs", "mif1", "msf1"), "a HEIF image"),
    (("crx ",), "a Canon raw image"),
    (("qt  ",), "a QuickTime movie"),
    (("M4A ", "M4B ", "M4P "), "an MPEG-4 audio file"),
    (("3gp4", "3gp5", "3gp6", "3gp7", "3g2a", "3g2b", "3g2c"), "a 3GP video"),
    (("mp41", "mp42", "mp71", "avc1", "dash", "M4V ", "f4v "), "an MP4 video"),
)


def convert_hint(command: str, what: str = "it") -> str:
    """``"bzna-tf convert tfrecord makes a .bzna of it"``: how data that is not a .bzna becomes one.

    The words of the TFRecord case below (which the C++ reader repeats), for
    the readers' other hints too (:mod:`bzna_tf.format.hints`: a folder of images).
    """
    return f"{command} makes a .bzna of {what}"


def printable(text) -> str:
    """``text`` (bytes, or a str such as a latin-1 box type) with all but printable ASCII escaped.

    Bytes and characters below U+0100 outside ``' '..'~'`` become ``\\xNN``
    (as the C++ reader writes them); other non-printable characters ``\\uNNNN``.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("latin-1")
    out = []
    for ch in text:
        o = ord(ch)
        if 0x20 <= o < 0x7F or (o >= 0x100 and ch.isprintable()):
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out)


def _brands(head: bytes) -> list[str]:
    """The major and compatible brands of an ``ftyp`` box at the start of ``head`` (as far as it holds)."""
    size = struct.unpack_from(">I", head)[0]
    end = min(size, len(head))
    found = [head[8:12].decode("latin-1")] if end >= 12 else []
    found += [head[k : k + 4].decode("latin-1") for k in range(16, end - 3, 4)]
    return found


def _is_text(head: bytes) -> bool:
    """No byte of ``head`` is a control character but tab, line feed, form feed and carriage return."""
    return all(b >= 0x20 and b != 0x7F or b in b"\t\n\x0c\r" for b in head)


def read_head(path) -> bytes | None:
    """The first :data:`SNIFF_BYTES` of the regular file at ``path`` (fewer if it is shorter), or None: no
    such file, not a regular file (a folder, or a FIFO, which is never opened: that would wait for a
    writer), or one that cannot be read."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES)
    except OSError:
        return None


def sniff(head: bytes) -> str | None:
    """What a file starting with ``head`` looks like ("a JPEG image"), or None when unknown or a .bzna.

    Args:
      head: the file's first bytes (up to :data:`SNIFF_BYTES`; fewer if the file is shorter).
    """
    head = bytes(head[:SNIFF_BYTES])
    if not head:
        return "an empty file"
    if len(head) >= 8 and head[4:8] == b"ftyp":
        brands = _brands(head)
        if "bzna" in brands:
            return None
        for names, what in BRANDS:
            if any(b in names for b in brands):
                return what
        return None
    for parts, what in SIGNATURES:
        if all(head[off : off + len(magic)] == magic for off, magic in parts):
            return what
    if len(head) >= 12 and masked_crc32c(head[:8]) == struct.unpack_from("<I", head, 8)[0]:
        return f"a TFRecord file ({convert_hint('bzna-tf convert tfrecord')})"
    if _is_text(head):
        start = head.lstrip(b" \t\n\x0c\r")[:14].lower()
        if start.startswith((b"<!doctype html", b"<html")):
            return "an HTML page"
        return "a text file"
    return None


def not_bzna_reason(head: bytes) -> str | None:
    """Why a file starting with ``head`` is not a .bzna, or None when it may be one.

    Args:
      head: the file's first bytes (up to :data:`SNIFF_BYTES`; fewer if the file is shorter).
    """
    head = bytes(head[:SNIFF_BYTES])
    if not head:
        return "not a .bzna file: expected an 'ftyp' box first, found an empty file"
    what = sniff(head)
    if len(head) >= 8 and head[4:8] == b"ftyp":
        if what is None:
            return None
        brand = head[8:12].decode("latin-1")
        return (
            f"not a .bzna file: it looks like {what} (its 'ftyp' box has the brand '{printable(brand)}' "
            "and not 'bzna')"
        )
    start = f"the file starts with '{printable(head[:8])}'"
    if what is None:
        return f"not a .bzna file: expected an 'ftyp' box first, {start}"
    return f"not a .bzna file: it looks like {what} (expected an 'ftyp' box first, {start})"
