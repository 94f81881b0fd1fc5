"""Hostile WebDataset shards (issue 35): bounded memory, names that cannot be stored, members not taken.

The large members are sparse files: a header declaring gigabytes, then a
hole, so the tests stay fast and small on disk. Peak memory is measured in a
child process (its own ``ru_maxrss`` and its workers').
"""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
from _sources_data import add_member, images

from bzna_tf.convert import (
    DEFAULT_MAX_IMAGE_BYTES,
    ConversionError,
    EncodeOptions,
    ImageFolderSource,
    SourceError,
    WebDatasetSource,
    convert,
)
from bzna_tf.convert.plan import fingerprint
from bzna_tf.convert.sources.webdataset import _tar_members
from bzna_tf.format import BznaFile

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}
CLI = ["--no-progress", "--preset", "ultrafast", "--order", "source"]
GiB, MiB = 1 << 30, 1 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sparse files, /proc's VmHWM")


def header(name, size=0, kind=b"0", linkname=""):
    """A ustar header, written by hand: tarfile would want the data of a 3 GiB member."""
    h = bytearray(512)
    for at, width, value in ((0, 100, name.encode()), (157, 100, linkname.encode())):
        assert len(value) <= width
        h[at : at + len(value)] = value
    h[100:124] = b"0000644\x000000000\x000000000\x00"
    h[124:136] = b"%011o\x00" % size
    h[136:148] = b"00000000000\x00"
    h[156:157] = kind
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def write_tar(path, members):
    """``members``: (name, bytes) or (name, size): a hole of that size (a sparse member)."""
    with open(path, "wb") as f:
        for name, data in members:
            size = data if isinstance(data, int) else len(data)
            f.write(header(name, size))
            if isinstance(data, int):
                f.seek(-(-size // 512) * 512, os.SEEK_CUR)
            else:
                f.write(data + bytes(-len(data) % 512))
        f.write(bytes(1024))
    return path


# A child process: runs the command line (or indexes shards) and writes the peak memory of its process
# and of its workers, in bytes. Its own peak is VmHWM: its ru_maxrss would start at the test process's
# size (Linux carries the high-water mark over exec), and the test process's RUSAGE_CHILDREN keeps every
# earlier child's. Its workers' is their ru_maxrss (RUSAGE_CHILDREN, once the pool has joined them).
CHILD = """
import json, resource, sys, time
out, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
def peak(who=None):
    if who is not None:
        return resource.getrusage(who).ru_maxrss * 1024
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
if what == "index":
    from bzna_tf.convert import WebDatasetSource
    before, start = peak(), time.perf_counter()
    source = WebDatasetSource(args)
    report = {"samples": len(source), "notes": source.notes, "before": before, "after": peak(),
              "seconds": time.perf_counter() - start}
else:
    from bzna_tf.cli import main
    report = {"rc": main(args), "main": peak(), "workers": peak(resource.RUSAGE_CHILDREN)}
with open(out, "w") as f:
    json.dump(report, f)
"""


def child(tmp_path, what, *args):
    out = tmp_path / "report.json"
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), what, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), r.stderr
    return json.loads(out.read_text()), r


def test_a_huge_image_member_is_refused_unread_naming_shard_and_member(tmp_path):
    """Issue 35 item 1: a 3 GiB 001.jpg drove a conversion to 6.2 GB (read, then sent to the worker)."""
    pic = images(1)[0]
    shard = write_tar(tmp_path / "w.tar", [("001.jpg", 3 * GiB), ("001.cls", b"0"), ("002.ppm", pic),
                                           ("002.cls", b"1")])  # fmt: skip
    assert os.stat(shard).st_blocks * 512 < MiB  # sparse
    said = (
        f"{shard} key '001': member '001.jpg' is 3,221,225,472 bytes (3.0 GiB), over the limit of "
        "268,435,456 bytes (256.0 MiB) on an encoded image (--max-image-bytes)"
    )
    out = tmp_path / "out.bzna"
    report, r = child(tmp_path, "cli", "convert", "webdataset", shard, out, "--processes", "1", "--on-error",
                      "skip", *CLI)  # fmt: skip
    assert report["rc"] == 0, r.stderr
    assert report["main"] < 512 * MiB and report["workers"] < 512 * MiB, report
    assert f"skipped 1 image that could not be read or decoded:\n  {said}" in r.stdout
    with BznaFile(out) as f:
        assert f.filenames() == ["002"]
        assert f.metadata["conversion"]["skipped"] == [[f"{shard} key '001'", said.split(": ", 1)[1]]]
    # Without --on-error skip it stops there, naming the shard, the member and both ways on.
    with pytest.raises(ConversionError) as e:
        convert(WebDatasetSource(shard), tmp_path / "x.bzna", workers=0, **FAST)
    assert str(e.value).startswith(said + "; --max-image-bytes N (EncodeOptions(max_image_bytes=N)) takes")
    assert "--on-error skip" in str(e.value) and not (tmp_path / "x.bzna").exists()


def test_a_raised_image_limit_reads_a_large_member_once_in_the_worker(tmp_path):
    """With --max-image-bytes above it, a 512 MiB member is read by the worker alone, once."""
    pic = images(1)[0]
    shard = write_tar(tmp_path / "w.tar", [("001.jpg", 512 * MiB), ("001.cls", b"0"), ("002.ppm", pic),
                                           ("002.cls", b"1")])  # fmt: skip
    report, r = child(tmp_path, "cli", "convert", "webdataset", shard, tmp_path / "o.bzna", "-j", "1",
                      "--on-error", "skip", "--max-image-bytes", "1G", *CLI)  # fmt: skip
    assert report["rc"] == 0, r.stderr
    # Read, and refused by the decoder (zeros are no image): the size limit did not refuse it.
    assert f"{shard} key '001': FFmpeg cannot decode it" in r.stdout
    assert report["main"] < 256 * MiB, report  # the main process holds no image bytes
    assert report["workers"] < 512 * MiB * 1.25 + 256 * MiB, report  # one copy, not one per process hop


def test_label_members_are_bounded_naming_the_member(tmp_path):
    pic = images(1)[0]
    members = [("001.ppm", pic), ("001.cls", 2 * GiB), ("001.json", 2 * GiB)]
    members += [("002.ppm", pic), ("002.cls", b"1"), ("002.json", b'{"label": 1}')]
    shard = write_tar(tmp_path / "w.tar", members)
    src = WebDatasetSource(shard)
    assert src.item(0).error == (
        "member 001.cls is 2,147,483,648 bytes, over the 1,048,576-byte limit on a label member (it holds a "
        "label, not data)"
    )
    by_json = WebDatasetSource(shard, label_key="json:label")
    assert by_json.item(0).error.startswith("member 001.json is 2,147,483,648 bytes, over the 1,048,576-byte")
    assert by_json.item(1).target == 1
    s = convert(by_json, tmp_path / "o.bzna", workers=0, on_error="skip", **FAST)
    assert s.images == 1 and [o for o, _ in s.skipped] == [f"{shard} key '001'"]


def test_the_image_limit_applies_to_files_and_a_larger_limit_converts_again_what_it_left_out(tmp_path):
    folder = tmp_path / "in" / "c"
    folder.mkdir(parents=True)
    (folder / "big.ppm").write_bytes(images(1, (24, 32))[0])  # 2,317 bytes
    (folder / "small.ppm").write_bytes(images(1, (16, 16))[0])  # 783 bytes
    src = ImageFolderSource(tmp_path / "in")
    small = {
        **FAST,
        "encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average", max_image_bytes=2000),
    }
    out = tmp_path / "o.bzna"
    with pytest.raises(
        ConversionError, match=r"c/big.ppm: the file is 2,317 bytes \(2.3 KiB\), over the limit "
    ):
        convert(src, out, workers=0, order="source", **small)
    s = convert(src, out, workers=0, on_error="skip", **small)
    assert s.images == 1 and [o for o, _ in s.skipped] == [str(folder / "big.ppm")]
    with BznaFile(out) as f:
        assert f.metadata["conversion"]["max_image_bytes"] == 2000
    # The same limit: finished. A larger one: converted again, keeping the image left out.
    again = convert(src, out, workers=0, on_error="skip", **small)
    assert again.written == [] and again.finished == [(str(out), 1)]
    larger = convert(src, out, workers=0, on_error="skip", **FAST)
    assert larger.written == [str(out)] and larger.images == 2
    assert (
        "converting o.bzna again: it left out images over the --max-image-bytes limit it was converted with "
        "(2,000 bytes), which this run's larger one (268,435,456 bytes) may take" in str(larger)
    )
    with BznaFile(out) as f:
        assert "max_image_bytes" not in f.metadata["conversion"]  # recorded only where it left images out
    # It decides only which images are refused: not part of the fingerprint.
    assert fingerprint(src, EncodeOptions()) == fingerprint(src, EncodeOptions(max_image_bytes=GiB))
    assert EncodeOptions().max_image_bytes == DEFAULT_MAX_IMAGE_BYTES == 256 * MiB
    for bad in (0, -1, True, 1.5, "1G"):
        with pytest.raises(ValueError, match=r"Expected `max_image_bytes` as an integer >= 1. Received: "):
            EncodeOptions(max_image_bytes=bad)


def test_the_cli_reads_the_image_limit_with_units(tmp_path, capsys):
    from bzna_tf.cli import build_parser

    parse = build_parser().parse_args
    base = ["convert", "folder", "in", "o.bzna"]
    assert parse(base).max_image_bytes == 256 * MiB
    assert parse([*base, "--max-image-bytes", "512M"]).max_image_bytes == 512 * MiB
    assert parse([*base, "--max-image-bytes", "2GiB"]).max_image_bytes == 2 * GiB
    assert parse([*base, "--max-image-bytes", "1000"]).max_image_bytes == 1000
    with pytest.raises(SystemExit):
        parse([*base, "--max-image-bytes", "12X"])
    assert "expected a number of bytes such as 268435456, 512M or 1G: '12X'" in capsys.readouterr().err


def test_member_names_that_cannot_be_stored_are_bad_samples_naming_shard_and_member(tmp_path):
    """Issue 35 item 6: '../../x.ppm' stopped the conversion with the writer's message, naming nothing."""
    pics = images(3)
    shard = write_tar(tmp_path / "w.tar", [("../../x.ppm", pics[0]), ("../../x.cls", b"0"),
                                           ("/abs/y.ppm", pics[1]), ("/abs/y.cls", b"1"),
                                           ("ok/z.ppm", pics[2]), ("ok/z.cls", b"2")])  # fmt: skip
    src = WebDatasetSource(shard)
    assert [it.error for it in src] == [
        "member '../../x.ppm': its key has a '..' part; the key is the sample's stored file name, a relative "
        "path without empty, '.' or '..' parts",
        "member '/abs/y.ppm': its key is an absolute path; the key is the sample's stored file name, a "
        "relative path without empty, '.' or '..' parts",
        None,
    ]
    with pytest.raises(ConversionError, match=rf"^{shard} key '../../x': member '../../x.ppm': its key has"):
        convert(src, tmp_path / "o.bzna", workers=0, order="source", **FAST)
    s = convert(src, tmp_path / "o.bzna", workers=0, on_error="skip", **FAST)
    assert s.images == 1 and sorted(o for o, _ in s.skipped) == [
        f"{shard} key '../../x'",
        f"{shard} key '/abs/y'",
    ]
    with BznaFile(tmp_path / "o.bzna") as f:
        assert f.filenames() == ["ok/z"]


def test_links_devices_and_other_special_members_are_counted_not_dropped_silently(tmp_path):
    """Issue 35 item 8: link and device members were neither taken nor counted."""
    pics = images(1)
    path = tmp_path / "w.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        add_member(tf, "z.ppm", pics[0])
        add_member(tf, "z.cls", b"0")
        for name, kind, link in (("a.jpg", tarfile.SYMTYPE, "z.ppm"), ("h.jpg", tarfile.LNKTYPE, "z.ppm"),
                                 ("dev.jpg", tarfile.CHRTYPE, ""), ("f.jpg", tarfile.FIFOTYPE, ""),
                                 ("d", tarfile.DIRTYPE, "")):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            tf.addfile(info)
    src = WebDatasetSource(path)
    assert len(src) == 1
    note = (
        "not taken: 4 tar members that are not regular files ('a.jpg' (symbolic link to 'z.ppm'), 'h.jpg' "
        "(hard link to 'z.ppm'), 'dev.jpg' (character device), ... (4 in all))"
    )
    assert src.notes == (note,)
    s = convert(src, tmp_path / "o.bzna", workers=0, **FAST)
    assert note in str(s).splitlines()
    one = tmp_path / "one.tar"
    with tarfile.open(one, "w") as tf:
        add_member(tf, "z.ppm", pics[0])
        info = tarfile.TarInfo("b.png")
        info.type = tarfile.BLKTYPE
        tf.addfile(info)
    assert (
        WebDatasetSource(one).notes[0]
        == "not taken: 1 tar member that is not a regular file ('b.png' (block device))"
    )


def test_the_index_costs_tens_of_bytes_per_member(tmp_path):
    """Issue 35 item 7: 1 M empty members took 957 MB (tarfile keeps a TarInfo of about 1 kB per member)."""
    n = 100_000
    path = tmp_path / "many.tar"
    with open(path, "wb") as f:
        for i in range(n):  # samples of one empty member, and names without an extension (not stored)
            f.write(header(f"{i:07d}.jpg"))
            f.write(header(f"{i:07d}"))
        f.write(bytes(1024))
    report, r = child(tmp_path, "index", path)
    assert report["samples"] == n, r.stderr
    per_member = (report["after"] - report["before"]) / (2 * n)
    assert per_member < 100, report  # about 25 measured (ext id, offset, size, key and its offset)
    assert report["notes"][0] == (
        "not taken: 100,000 tar members without an extension ('0000000', '0000001', '0000002', ... "
        "(100,000 in all))"
    )
    # An empty image member is a bad sample, found without sending it to a worker.
    assert WebDatasetSource(path).item(5).error == "member 0000005.jpg is empty (0 bytes)"


def test_the_headers_are_read_as_tarfile_reads_them(tmp_path):
    """Every format tarfile writes (long names in each format's way, pax, links): the same members."""
    long = "d" * 60 + "/" + "x" * 80 + ".jpg"
    for fmt in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        path = tmp_path / f"{fmt}.tar"
        names = ["a.jpg", long, "é/ü.cls"] + (
            ["d/" + "y" * 300 + ".png"] if fmt != tarfile.USTAR_FORMAT else []
        )
        with tarfile.open(path, "w", format=fmt) as tf:
            for k, name in enumerate(names):
                add_member(tf, name, os.urandom(100 * k + 1))
            link = tarfile.TarInfo("s.jpg")
            link.type, link.linkname = tarfile.SYMTYPE, "a.jpg"
            tf.addfile(link)
            add_member(tf, "last.cls", b"1")
        with tarfile.open(path) as tf:
            want = [(m.name, m.offset_data, m.size) for m in tf if m.isreg()]
        with open(path, "rb") as f:
            got = [
                (n, o, s)
                for n, kind, o, s, _ in _tar_members(f, path, os.path.getsize(path))
                if kind == "file"
            ]
        assert got == want and len(got) == len(names) + 1


def test_a_huge_extended_header_is_refused_unread(tmp_path):
    path = tmp_path / "w.tar"
    with open(path, "wb") as f:
        f.write(header("x", 2 * GiB, kind=b"x"))  # a pax header of 2 GiB
        f.seek(2 * GiB, os.SEEK_CUR)
        f.write(bytes(1024))
    said = (
        rf"{path}: corrupt tar header at byte 0 \(at its start\): a pax extended header of 2147483648 bytes"
    )
    with pytest.raises(SourceError, match=said + r" \(such a header holds a name"):
        WebDatasetSource(path)
    # A base-256 size of 2**80 bytes (tarfile's reader failed on seeking there): a truncated member.
    with open(path, "wb") as f:
        h = bytearray(header("x.jpg"))
        h[124:136], h[148:156] = b"\x80" + (1 << 80).to_bytes(11, "big"), b" " * 8
        h[148:156] = b"%06o\x00 " % sum(h)
        f.write(bytes(h) + bytes(1024))
    assert WebDatasetSource(path).item(0).error == (
        f"member 'x.jpg' is truncated: it declares {1 << 80} bytes at byte 512, the file ends 1024 bytes "
        "after it starts"
    )
    # A GNU long name header with no member after it.
    with open(path, "wb") as f:
        f.write(header("././@LongLink", 10, kind=b"L") + b"long.jpg".ljust(512, b"\0"))
        f.write(bytes(1024))
    with pytest.raises(SourceError, match="with no member after it"):
        WebDatasetSource(path)
    with tarfile.open(tmp_path / "pax.tar", "w", format=tarfile.PAX_FORMAT) as tf:
        add_member(tf, "0001.jpg", b"x" * 10)
        info = tarfile.TarInfo("0002.jpg")
        info.size, info.pax_headers = 5, {"comment": "io"}
        tf.addfile(info, io.BytesIO(b"y" * 5))
    src = WebDatasetSource(tmp_path / "pax.tar")
    assert [(it.member, it.read()) for it in src] == [("0001.jpg", b"x" * 10), ("0002.jpg", b"y" * 5)]
