"""Files that are not .bzna, directories, escaped box types and counted nouns, in both readers.

Each case is opened by the Python reader (BznaFile) and by the C++ one (the
source op); the C++ message must contain the Python one, word for word.
"""

import io
import os
import struct
import threading

import pytest
from test_bad_input import _pic

from bzna_tf import cli
from bzna_tf.format import BznaFile, BznaFormatError, BznaShards, BznaWriter
from bzna_tf.format.boxes import box
from bzna_tf.format.sniff import SIGNATURES, SNIFF_BYTES, not_bzna_reason, printable, sniff
from bzna_tf.format.wording import count, holds


def _op_message(path, error="DataLossError", **kwargs):
    """The C++ reader's message for ``path`` (the source op's index read)."""
    import tensorflow as tf

    from bzna_tf.ops import BznaDataset

    paths = [str(p) for p in path] if isinstance(path, list) else str(path)
    with pytest.raises(getattr(tf.errors, error)) as e:
        list(BznaDataset(paths, **kwargs))
    return e.value.message


def _python_message(path) -> str:
    with pytest.raises(BznaFormatError) as e:
        BznaFile(path)
    return str(e.value)


def _both(tmp_path, data: bytes, name="x.bzna") -> str:
    """The Python reader's message for a file holding ``data``, checked against the C++ reader's."""
    path = tmp_path / name
    path.write_bytes(data)
    msg = _python_message(path)
    assert msg.startswith(f"{path}, byte offset 0: not a .bzna file: ")
    assert all(" " <= c <= "~" for c in msg), msg  # printable ASCII only
    assert msg in _op_message(path)
    return msg


def _with_signature(parts) -> bytes:
    head = bytearray(SNIFF_BYTES)  # zeros: nothing else matches
    for off, magic in parts:
        head[off : off + len(magic)] = magic
    return bytes(head)


@pytest.mark.parametrize("parts, what", SIGNATURES, ids=[f"{w}-{p[0][1][:4]!r}" for p, w in SIGNATURES])
def test_every_signature_is_named_by_both_readers(tmp_path, parts, what):
    data = _with_signature(parts)
    assert sniff(data) == what
    start = printable(data[:8])
    assert _both(tmp_path, data) == (
        f"{tmp_path / 'x.bzna'}, byte offset 0: not a .bzna file: it looks like {what} "
        f"(expected an 'ftyp' box first, the file starts with '{start}')"
    )


def test_a_jpeg_renamed_to_bzna(tmp_path):
    """The issue's case: a JPEG's bytes used to be printed raw as a box type."""
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + bytes(600)
    msg = _both(tmp_path, jpeg, "photo.bzna")
    assert msg.endswith(
        "not a .bzna file: it looks like a JPEG image (expected an 'ftyp' box first, the file starts with "
        "'\\xff\\xd8\\xff\\xe0\\x00\\x10JF')"
    )


@pytest.mark.parametrize(
    "data, what",
    [
        (b"hello world\n", "a text file"),
        (b"\n  <!DOCTYPE html>\n<html><body>Access denied</body></html>\n", "an HTML page"),
        (b"<HTML><HEAD><TITLE>404</TITLE>", "an HTML page"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 9\n", "a Git LFS pointer"),
        (b"GIF89a\x01\x00", "a GIF image"),  # shorter than the sniffed bytes
        (b"x" * 300 + b"ustar" + b"y" * 100, "a text file"),  # "ustar" at 300, not 257: not a tar
        (b"a" * 257 + b"ustar" + bytes(250), "a tar archive"),
    ],
)
def test_text_html_and_short_files(tmp_path, data, what):
    assert f"it looks like {what}" in _both(tmp_path, data)


def test_a_tfrecord_is_recognised_by_its_checksum(tmp_path):
    from bzna_tf.convert.tfrecord import (
        masked_crc32c,  # the TFRecord reader's CRC (checked against TF's files)
    )

    payload = b"\x0a\x00"
    length = struct.pack("<Q", len(payload))
    record = length + struct.pack("<I", masked_crc32c(length)) + payload + struct.pack("<I", 0)
    assert "it looks like a TFRecord file" in _both(tmp_path, record)
    # The same bytes with the checksum off by one are not a TFRecord: nothing known.
    bad = length + struct.pack("<I", masked_crc32c(length) ^ 1) + payload
    assert sniff(bad) is None
    msg = _both(tmp_path, bad)
    assert "looks like" not in msg and "expected an 'ftyp' box first, the file starts with '\\x02\\x00" in msg


def test_empty_and_unknown_files(tmp_path):
    assert _both(tmp_path, b"").endswith(
        "not a .bzna file: expected an 'ftyp' box first, found an empty file"
    )
    unknown = bytes(range(1, 20))
    assert sniff(unknown) is None
    assert _both(tmp_path, unknown).endswith(
        "not a .bzna file: expected an 'ftyp' box first, the file starts with "
        "'\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08'"
    )


def _ftyp(major: bytes, *compatible: bytes) -> bytes:
    return box(b"ftyp", major, struct.pack(">I", 0), *compatible)


@pytest.mark.parametrize(
    "major, compatible, what",
    [
        (b"heic", (b"mif1", b"heic"), "a HEIF image"),
        (b"mif1", (b"mif1", b"avif"), "an AVIF image"),  # AVIF is found among the compatible brands
        (b"mp42", (b"isom", b"mp42"), "an MP4 video"),
        (b"qt  ", (), "a QuickTime movie"),
        (b"M4A ", (b"M4A ", b"isom"), "an MPEG-4 audio file"),
        (b"3gp5", (b"3gp5",), "a 3GP video"),
        (b"crx ", (b"crx ",), "a Canon raw image"),
    ],
)
def test_iso_files_of_other_brands(tmp_path, major, compatible, what):
    data = _ftyp(major, *compatible) + box(b"mdat", bytes(64))
    msg = _both(tmp_path, data)
    assert msg.endswith(
        f"not a .bzna file: it looks like {what} "
        f"(its 'ftyp' box has the brand '{major.decode()}' and not 'bzna')"
    )


@pytest.mark.parametrize(
    "ftyp",
    [
        _ftyp(b"isom", b"bzna", b"isom"),  # what bzna_tf and the original tools write
        _ftyp(b"mp42", b"bzna"),  # 'bzna' wins over any other brand
        _ftyp(b"isom", b"isom"),  # an ISO file of no known kind: read on, judged by its boxes
    ],
)
def test_iso_files_that_may_be_bzna_are_read_on(ftyp):
    assert not_bzna_reason(ftyp + box(b"free")) is None


def test_a_writer_file_is_not_sniffed_away(tmp_path):
    path = tmp_path / "ok.bzna"
    with BznaWriter(path) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
    assert not_bzna_reason(path.read_bytes()[:SNIFF_BYTES]) is None
    with BznaFile(path) as f:
        assert len(f) == 1


def test_box_types_are_escaped_in_both_readers(tmp_path):
    """A non-printable box type deep in the file is written \\xNN by both readers (not as raw bytes)."""
    path = tmp_path / "ok.bzna"
    with BznaWriter(path) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
    data = bytearray(path.read_bytes())
    at = data.rindex(b"mvhd") - 4  # the outer moov's first child
    data[at : at + 8] = struct.pack(">I", 1 << 30) + b"\xee\x01Ex"  # a bogus type and size
    path.write_bytes(bytes(data))
    msg = _python_message(path)
    assert "box moov/\\xee\\x01Ex, " in msg and "runs past the end of moov" in msg
    assert all(" " <= c <= "~" for c in msg), msg
    op = _op_message(path)  # the C++ reader names the parent box, and the type in the reason
    assert "box moov, " in op and "'\\xee\\x01Ex'" in op and all(" " <= c <= "~" for c in op), op


def test_printable():
    assert printable(b"ab\xff\x00'\\") == "ab\\xff\\x00'\\"
    assert printable("\xeeEx\x7f") == "\\xeeEx\\x7f"  # a latin-1 box type, as the reader decodes it
    assert printable("naïve 名前\u200b") == "na\\xefve 名前\\u200b"


def test_a_directory_is_named_where_a_file_is_expected(tmp_path):
    folder = tmp_path / "train.bzna"  # a directory with a .bzna name: the worst case
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as e:
        BznaFile(folder)
    assert str(e.value).startswith(f"{folder} is a directory, expected a .bzna file")
    assert _op_message(folder, "InvalidArgumentError").find(f"{folder} is a directory") >= 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_or_a_device_is_refused_without_waiting(tmp_path, capsys):
    # Opening a FIFO for reading waited for a writer forever (every entry point hung). A thread plays the
    # writer that never comes: it connects only to a reader already waiting, so a regression fails, not hangs.
    fifo = tmp_path / "x.bzna"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock():
        while not done.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO while no reader waits
            except OSError:
                pass

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        with pytest.raises(BznaFormatError, match=r"x\.bzna: not a regular file but a FIFO \(named pipe\)"):
            BznaFile(fifo)
        with pytest.raises(BznaFormatError, match="not a regular file but a FIFO"):
            BznaShards([str(fifo)])
        with pytest.raises(BznaFormatError, match="not a regular file but a FIFO"):
            BznaFile(f"file://{fifo}")  # TensorFlow's filesystem would wait as well
        assert cli.main(["info", str(fifo)]) == 1
        assert "x.bzna: not a regular file but a FIFO" in capsys.readouterr().err
        # The native ops, used on their own, waited as well.
        message = _op_message(fifo, "InvalidArgumentError")
        assert "x.bzna: not a regular file but a FIFO (named pipe)" in message
        import tensorflow as tf

        from bzna_tf.ops import num_samples

        with pytest.raises(tf.errors.InvalidArgumentError, match="not a regular file but a FIFO"):
            num_samples([str(fifo)])
    finally:
        done.set()
        thread.join()
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.bzna").symlink_to("/dev/zero")
        with pytest.raises(BznaFormatError, match="zero.bzna: not a regular file but a character device"):
            BznaFile(tmp_path / "zero.bzna")
        message = _op_message(tmp_path / "zero.bzna", "InvalidArgumentError")
        assert "zero.bzna: not a regular file but a character device" in message


def test_the_cli_names_the_path_of_every_os_error(tmp_path, capsys):
    folder = tmp_path / "lists"
    folder.mkdir()
    assert cli.main(["samplelist", "--check", str(folder)]) == 1
    assert capsys.readouterr().err == f"bzna-tf samplelist: {folder}: Is a directory\n"
    assert cli.main(["info", str(folder)]) == 1
    assert capsys.readouterr().err == f"bzna-tf info: {folder} is a directory without .bzna files\n"
    assert cli.main(["info", str(tmp_path / "missing.bzna")]) == 1
    assert (
        capsys.readouterr().err == f"bzna-tf info: {tmp_path / 'missing.bzna'}: No such file or directory\n"
    )
    jpeg = tmp_path / "photo.bzna"
    jpeg.write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    assert cli.main(["info", str(jpeg)]) == 1
    assert "it looks like a JPEG image" in capsys.readouterr().err


def test_counts_are_worded_in_the_right_number():
    assert [count(n, "sample") for n in (0, 1, 2, 1234)] == [
        "0 samples",
        "1 sample",
        "2 samples",
        "1,234 samples",
    ]
    assert count(1234, "sample", grouped=False) == "1234 samples"
    assert count(1, "entry", "entries") == "1 entry" and count(3, "entry", "entries") == "3 entries"
    assert holds(["a.bzna"]) == "a.bzna holds" and holds(["a", "b"]) == "the 2 files hold"


def test_out_of_range_messages_say_holds(tmp_path):
    one = tmp_path / "one.bzna"
    with BznaWriter(one) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
    two = tmp_path / "two.bzna"  # another file (one listed twice, or a copy of it, is refused)
    with BznaWriter(two) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="b.jpg")
    with BznaFile(one) as f, pytest.raises(IndexError, match=f"out of range: {one} holds 1 sample$"):
        f.sample(1)
    with (
        BznaShards([one, two]) as s,
        pytest.raises(IndexError, match="out of range: the 2 files hold 2 samples$"),
    ):
        s.locate(2)
    msg = _op_message(one, "InvalidArgumentError", indices=[1])
    assert f"indices[0] = 1 is out of range: {one} holds 1 sample " in msg
    msg = _op_message([one, two], "InvalidArgumentError", indices=[5])
    assert "indices[0] = 5 is out of range: the files hold 2 samples" in msg


def test_read_samples_says_holds(tmp_path):
    import tensorflow as tf

    from bzna_tf.ops import read_samples

    one = tmp_path / "one.bzna"
    with BznaWriter(one) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=f"sample index 3 is out of range: {one} holds 1 sample"
    ):
        read_samples(str(one), tf.constant([3], tf.int64))


def test_bytes_io_names_are_kept():
    with pytest.raises(BznaFormatError, match=r"^mem, byte offset 0: not a \.bzna file: it looks like a PNG"):
        BznaFile(io.BytesIO(b"\x89PNG\r\n\x1a\n" + bytes(40)), name="mem")
