"""Conversion to .bzna: the sources, the converter, the files it writes."""

import json
import os
import re
import struct
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import gradient

from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    GulpSource,
    ImageDecodeError,
    ImageFolderSource,
    Item,
    SourceError,
    TFRecordError,
    TFRecordSource,
    convert,
    decode_image,
    parse_example,
    resize_rgb,
    thumbnail_size,
)
from bzna_tf.convert.encode import rgb_to_yuv420
from bzna_tf.convert.tfrecord import count_records, iter_records
from bzna_tf.decode import decode_annexb
from bzna_tf.format import BznaFile
from bzna_tf.format.boxes import parse_boxes
from bzna_tf.ops.warp import warp_yuv420

# The fixture's first 10 pictures: the 9 labelled ones and the first unlabelled one (wider than 512 pixels).
N_PHOTOS = 10


def jpeg(rgb, quality=95):
    return tf.io.encode_jpeg(rgb, quality=quality).numpy()


def example(features):
    def feature(v):
        if isinstance(v, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
        if isinstance(v, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[v]))
        if isinstance(v, list) and v and isinstance(v[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
        if isinstance(v, list) and v and isinstance(v[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=v))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v if isinstance(v, list) else [v]))

    return tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in features.items()}))


def write_tfrecord(path, records, compression=None):
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    with tf.io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r.SerializeToString() if hasattr(r, "SerializeToString") else r)
    return path


def imagenet_records(images, labels, names):
    return [
        example({"image/encoded": jpeg(im), "image/class/label": lab, "image/filename": n.encode()})
        for im, lab, n in zip(images, labels, names, strict=True)
    ]


@pytest.fixture(scope="module")
def small_images():
    return [gradient(40 + 8 * i, 56 + 4 * i, seed=i) for i in range(6)]


# --------------------------------------------------------------------------- TFRecord without TensorFlow


def test_example_parser_matches_tensorflow():
    rng = np.random.default_rng(0)
    for _ in range(50):
        feats = {
            "bytes": bytes(rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8)),
            "ints": [
                int(v) for v in rng.integers(-(2**63), 2**63 - 1, int(rng.integers(1, 6)), dtype=np.int64)
            ],
            "floats": [float(np.float32(v)) for v in rng.normal(size=int(rng.integers(1, 4)))],
            "many": [b"a", b"", b"xyz"],
            "neg": -1,
        }
        ex = example(feats)
        parsed = parse_example(ex.SerializeToString())
        assert parsed["bytes"] == [feats["bytes"]]
        assert parsed["ints"] == feats["ints"]
        np.testing.assert_array_equal(np.float32(parsed["floats"]), np.float32(feats["floats"]))
        assert parsed["many"] == feats["many"] and parsed["neg"] == [-1]
        assert parse_example(ex.SerializeToString(), keys={"neg"}) == {"neg": [-1]}
    with pytest.raises(ValueError):
        parse_example(b"\x0a\x10\x0a\x05")  # a length running past the end


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_record_framing(tmp_path, compression):
    records = [bytes([i]) * (i * 37) for i in range(20)]
    path = write_tfrecord(tmp_path / "r.tfrecord", records, compression)
    got = list(iter_records(path, compression))
    assert [d for _, _, d in got] == records
    assert count_records(path, compression) == 20
    if compression is None:
        assert [o for _, o, _ in got] == list(np.cumsum([0] + [16 + len(r) for r in records[:-1]]))


def test_record_framing_errors(tmp_path):
    path = write_tfrecord(tmp_path / "r.tfrecord", [b"x" * 100, b"y" * 100])
    data = path.read_bytes()
    (tmp_path / "cut").write_bytes(data[:-10])
    with pytest.raises(TFRecordError, match=r"record 1 at byte 116: .*announced"):
        list(iter_records(tmp_path / "cut"))
    with pytest.raises(TFRecordError, match="record 1 at byte 116"):
        count_records(tmp_path / "cut")
    bad = bytearray(data)
    bad[0] ^= 1
    (tmp_path / "bad").write_bytes(bytes(bad))
    with pytest.raises(TFRecordError, match="record 0 at byte 0: the length's checksum"):
        list(iter_records(tmp_path / "bad"))
    gz = write_tfrecord(tmp_path / "g", [b"z"], "GZIP")
    with pytest.raises(TFRecordError, match="checksum"):
        list(iter_records(gz))  # compressed, read without `compression`


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_a_compressed_file_cut_short_is_refused(tmp_path, compression):
    # A ZLIB file cut short lost its last records without a word; a GZIP one gave gzip's raw EOFError.
    records = [bytes([i]) * 200 for i in range(30)]
    data = write_tfrecord(tmp_path / "r.tfrecord", records, compression).read_bytes()
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(data[:-29])
    said = re.escape(f"{cut}: the {compression} stream ends before its end marker, at record ")
    said += r"\d+ \(byte \d+ of the uncompressed data; \d+ records read\): the file is cut short"
    with pytest.raises(TFRecordError, match=said):
        list(iter_records(cut, compression))
    with pytest.raises(TFRecordError, match="stream ends before its end marker"):
        count_records(cut, compression)
    # Read without the right compression: said so, not a zlib traceback.
    other = {"GZIP": "ZLIB", "ZLIB": "GZIP"}[compression]
    said = re.escape(f"{tmp_path / 'r.tfrecord'}: not valid {other} data at record 0 ")
    with pytest.raises(TFRecordError, match=said + ".*Is --compression"):
        list(iter_records(tmp_path / "r.tfrecord", other))


def test_a_zlib_file_with_bytes_after_its_stream_is_refused(tmp_path):
    # TensorFlow reads the first ZLIB stream of a file and ignores what follows it: two files joined.
    one = write_tfrecord(tmp_path / "a", [b"a" * 50] * 3, "ZLIB").read_bytes()
    two = write_tfrecord(tmp_path / "b", [b"b" * 50] * 4, "ZLIB").read_bytes()
    (tmp_path / "joined").write_bytes(one + two)
    said = f"joined: {len(two)} bytes after the end of the ZLIB stream, after 3 records: a ZLIB-compressed"
    with pytest.raises(TFRecordError, match=said):
        list(iter_records(tmp_path / "joined", "ZLIB"))
    assert count_records(tmp_path / "a", "ZLIB") == 3


def test_a_truncated_compressed_file_stops_the_conversion_naming_it(tmp_path, capsys, small_images):
    from bzna_tf.cli import main

    data = write_tfrecord(
        tmp_path / "r", imagenet_records(small_images[:3], [0, 1, 2], ["a", "b", "c"]), "ZLIB"
    ).read_bytes()
    (tmp_path / "cut").write_bytes(data[:-29])
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(tmp_path / "cut"), str(out), "--label-offset", "0", "--compression",
            "ZLIB", "--order", "source", "-j", "0", "--preset", "ultrafast", "--no-progress"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"bzna-tf convert: {tmp_path / 'cut'}: the ZLIB stream ends before its end marker" in err, err
    assert "Traceback" not in err and not out.exists()


def _flip_label_bit(data, record):
    """``data`` (an uncompressed TFRecord file) with one bit of record ``record``'s label value flipped."""
    offset = 0
    for _ in range(record):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        offset += 16 + length
    (length,) = struct.unpack("<Q", data[offset : offset + 8])
    body = data[offset + 12 : offset + 12 + length]
    at = body.rindex(b"image/class/label") + len(b"image/class/label") + 6  # the label's varint
    out = bytearray(data)
    out[offset + 12 + at] ^= 0x02
    return bytes(out)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_a_record_whose_data_does_not_match_its_checksum_is_a_bad_record(
    tmp_path, capsys, small_images, compression
):
    import gzip

    from bzna_tf.cli import main
    from bzna_tf.convert.tfrecord import TFRecordDataError

    plain = write_tfrecord(tmp_path / "r", imagenet_records(small_images[:4], [0, 1, 3, 2], list("abcd")))
    flipped = _flip_label_bit(plain.read_bytes(), 2)  # label 3 -> 1: still a valid Example
    (tmp_path / "flipped").write_bytes(flipped)
    with pytest.raises(tf.errors.DataLossError):  # TensorFlow's reader refuses it
        list(tf.data.TFRecordDataset(str(tmp_path / "flipped")))
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(flipped if compression is None else gzip.compress(flipped))
    got = list(iter_records(path, compression))
    assert [isinstance(d, TFRecordDataError) for _, _, d in got] == [False, False, True, False]
    assert got[2][2].reason.startswith("the data's checksum does not match: the record is corrupted")
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(path), str(out), "--label-offset", "0", "--order", "source", "-j", "0",
            "--preset", "ultrafast", "--no-progress"]  # fmt: skip
    argv += ["--compression", compression] if compression else []
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{path} record 2 (byte " in err and "the data's checksum does not match" in err, err
    assert not out.exists()
    assert main([*argv, "--on-error", "skip"]) == 0
    with BznaFile(out) as f:  # record 2 left out, the others with their own labels
        assert f.filenames() == ["a", "b", "d"] and list(f.targets) == [0, 1, 2]


def test_a_source_taken_as_the_output_by_an_unquoted_pattern_is_never_written_over(
    tmp_path, small_images, capsys
):
    # `bzna-tf convert tfrecord data/train-* --overwrite`: the shell's last match became the output, and
    # --overwrite replaced that TFRecord with a .bzna of the others.
    from bzna_tf.cli import main

    shards = [
        write_tfrecord(tmp_path / f"train-0000{k}-of-00002", imagenet_records(small_images[:2], [0, 1], "ab"))
        for k in range(2)
    ]
    before = shards[1].read_bytes()
    for extra in ([], ["--overwrite"]):
        argv = ["convert", "tfrecord", *map(str, shards), "--label-offset", "0", "--no-progress", *extra]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"not .bzna files, --overwrite or not: {shards[1]}: a TFRecord file" in err, err
        assert "Is the output one of the sources" in err
    assert shards[1].read_bytes() == before


def test_a_record_of_several_images_is_refused_not_cut_to_its_first(tmp_path, small_images):
    views = [jpeg(small_images[0]), jpeg(small_images[1])]
    write_tfrecord(tmp_path / "v.rec", [example({"image/encoded": views, "image/class/label": 1})])
    with pytest.raises(SourceError, match=r"v.rec record 0 \(byte 0\): feature 'image/encoded' holds 2 "
                       r"images; a .bzna file stores one picture per sample"):  # fmt: skip
        convert(TFRecordSource(tmp_path / "v.rec", label_offset=0), tmp_path / "v.bzna", workers=0,
                order="source", progress=False, log=None)  # fmt: skip


# --------------------------------------------------------------------------- sources


def test_tfrecord_source_classic_and_mapped_keys(tmp_path, small_images):
    write_tfrecord(
        tmp_path / "train-00000-of-00002", imagenet_records(small_images[:3], [1, 2, 1000], ["a", "b", "c"])
    )
    write_tfrecord(
        tmp_path / "train-00001-of-00002", imagenet_records(small_images[3:], [5, 6, 7], ["d/e", "f", "g"])
    )
    src = TFRecordSource(str(tmp_path / "train-*"), label_offset=-1)
    items = list(src)
    assert len(src) == 6
    assert [i.target for i in items] == [0, 1, 999, 4, 5, 6]
    assert [i.filename for i in items] == ["a", "b", "c", "e", "f", "g"]
    first = imagenet_records(small_images[3:4], [5], ["d/e"])[0].SerializeToString()
    assert items[4].origin.endswith(f"train-00001-of-00002 record 1 (byte {16 + len(first)})")
    assert items[0].data == jpeg(small_images[0])  # the record's bytes, untouched
    # FFmpeg and libjpeg upsample chroma differently: close, not equal.
    assert (
        np.abs(decode_image(items[0].data).astype(int) - tf.io.decode_jpeg(items[0].data).numpy()).mean() < 2
    )
    # Other keys, no label, no name.
    write_tfrecord(
        tmp_path / "other.rec",
        [example({"jpg": jpeg(small_images[0]), "cls": 3}), example({"jpg": jpeg(small_images[1])})],
    )
    other = tmp_path / "other.rec"
    items = list(TFRecordSource(other, image_key="jpg", label_key="cls", filename_key=None))
    assert [(i.target, i.filename) for i in items] == [(3, "other.rec-000000"), (None, "other.rec-000001")]
    assert items[1].error.startswith("no label: no 'cls' feature, or an empty one (the record has the")
    items = list(TFRecordSource(other, image_key="jpg", label_key="cls", allow_unlabelled=True))
    assert items[1].error is None and items[1].unlabelled == "without the 'cls' feature (--allow-unlabelled)"
    # A layout of neither kind and no --label-key: unlabelled, and the summary says so.
    src = TFRecordSource(other, image_key="jpg")
    assert src.label_key is None and src.notes[0].startswith("no label: the records are in neither")
    # The features are listed, with the flag to use.
    with pytest.raises(
        SourceError, match=r"record 0 .*no image feature.*'cls' \(int64\), 'jpg' \(bytes\).*--image-key"
    ):
        TFRecordSource(tmp_path / "other.rec")
    # A record without the image, or that is not an Example: a bad record (on_error stops or skips it).
    records = [example({"jpg": jpeg(small_images[0])}), example({"x": 1.0}), b"\x0a\x05junk!"]
    gap = tmp_path / "gap.rec"
    write_tfrecord(gap, [*records, example({"jpg": jpeg(small_images[1])})])
    items = list(TFRecordSource(gap, image_key="jpg", label_key=None))
    assert [i.error is None for i in items] == [True, False, False, True]
    assert items[1].error == (
        "no bytes feature 'jpg'; the record has the features ['x' (float)]: name the image's with "
        "--image-key (image_key=)"
    )
    assert items[2].error.startswith("not a tf.train.Example: ") and " record 2 (byte " in items[2].origin
    fast = {"workers": 0, "order": "source", "progress": False, "log": None}
    with pytest.raises(
        ConversionError, match=r"gap.rec record 1 \(byte .*\): no bytes feature 'jpg'.*on-error"
    ):
        convert(TFRecordSource(gap, image_key="jpg", label_key=None), tmp_path / "g.bzna", **fast)
    summary = convert(TFRecordSource(gap, image_key="jpg", label_key=None), tmp_path / "g.bzna",
                      on_error="skip", **fast)  # fmt: skip
    assert summary.images == 2 and [why[:24] for _, why in summary.skipped] == [
        "no bytes feature 'jpg'; ",
        "not a tf.train.Example: ",
    ]
    with pytest.raises(SourceError, match="no TFRecord file matches"):
        TFRecordSource(str(tmp_path / "nothing-*"))


def test_image_folder_source(tmp_path, small_images):
    for cls, names in {"zebra": ["1.jpg", "0.JPEG"], "ant": ["x.png"], ".hidden": ["h.jpg"]}.items():
        (tmp_path / cls).mkdir()
        for n in names:
            data = tf.io.encode_png(small_images[0]).numpy() if n.endswith("png") else jpeg(small_images[0])
            (tmp_path / cls / n).write_bytes(data)
    (tmp_path / "zebra" / "notes.txt").write_text("not an image")
    src = ImageFolderSource(tmp_path)
    assert src.classes == ["ant", "zebra"] and len(src) == 3
    assert [(i.filename, i.target) for i in src] == [
        ("ant/x.png", 0),
        ("zebra/0.JPEG", 1),
        ("zebra/1.jpg", 1),
    ]
    assert src.notes == (
        "not taken: 1 file whose names do not end in an image extension ('zebra/notes.txt')",
    )
    flat = ImageFolderSource(tmp_path / "zebra")
    assert [(i.filename, i.target) for i in flat] == [("0.JPEG", None), ("1.jpg", None)]
    with pytest.raises(SourceError, match="no image files"):
        ImageFolderSource(tmp_path / "ant" / "..", extensions=(".gif",))


def write_gulp_chunk(folder, k, videos):
    """A GulpIO chunk as seed 002 describes it: JPEG frames padded to 4 bytes + JSON meta."""
    folder.mkdir(exist_ok=True)
    data, meta, offset = bytearray(), {}, 0
    for vid, (label, frames) in videos.items():
        info = []
        for frame in frames:
            j = jpeg(frame)
            pad = (4 - len(j) % 4) % 4
            data += j + b"\0" * pad
            info.append([offset, pad, len(j) + pad])
            offset += len(j) + pad
        meta[vid] = {"frame_info": info, "meta_data": [{"label": label, "id": vid}]}
    (folder / f"data_{k}.gulp").write_bytes(bytes(data))
    (folder / f"meta_{k}.gmeta").write_text(json.dumps(meta))


def test_gulp_source(tmp_path, small_images):
    write_gulp_chunk(
        tmp_path / "g", 0, {"702766": ("walk", small_images[:2]), "803959": ("jump", small_images[2:3])}
    )
    write_gulp_chunk(tmp_path / "g", 1, {"17": ("walk", small_images[3:4])})
    src = GulpSource(tmp_path / "g")
    items = list(src)
    assert len(src) == 4 and src.label_map == {"jump": 0, "walk": 1}
    assert [(i.filename, i.target) for i in items] == [
        ("702766_0000.jpg", 1),
        ("702766_0001.jpg", 1),
        ("803959_0000.jpg", 0),
        ("17_0000.jpg", 1),
    ]
    assert items[2].data == jpeg(small_images[2])  # the frame's bytes, without the padding
    # Integer labels are kept; a .gmeta file names one chunk.
    write_gulp_chunk(tmp_path / "h", 3, {"1": (7, small_images[:1])})
    assert [i.target for i in GulpSource(tmp_path / "h" / "meta_3.gmeta")] == [7]
    meta = json.loads((tmp_path / "h" / "meta_3.gmeta").read_text())
    meta["1"]["frame_info"][0][2] = 10**9
    (tmp_path / "h" / "meta_3.gmeta").write_text(json.dumps(meta))
    with pytest.raises(SourceError, match=r"video '1' frame 0: bad frame_info"):
        GulpSource(tmp_path / "h")


def test_decode_image_errors_and_formats(small_images):
    big = gradient(240, 320, seed=5)
    data = jpeg(big)
    cut = len(data) * 2 // 3
    # A truncated JPEG: refused by default, saying what the bytes are...
    with pytest.raises(ImageDecodeError, match=rf"^FFmpeg cannot decode it \(.+\): JPEG data of {cut} bytes "
                       r"that has no end-of-image marker \(FF D9\)$"):  # fmt: skip
        decode_image(data[:cut])
    assert decode_image(data[:cut], lenient=True).shape == big.shape  # ...kept when asked
    img = small_images[1]
    with pytest.raises(
        ImageDecodeError, match=r": 19 bytes starting b'not an image at ' \(neither JPEG nor PNG\)$"
    ):
        decode_image(b"not an image at all")
    png = tf.io.encode_png(img).numpy()
    with pytest.raises(
        ImageDecodeError, match=rf": PNG data of {len(png) // 2} bytes that has no IEND chunk$"
    ):
        decode_image(png[: len(png) // 2])
    with pytest.raises(ImageDecodeError, match="empty"):
        decode_image(b"")
    np.testing.assert_array_equal(decode_image(tf.io.encode_png(img).numpy()), img)
    gray = decode_image(tf.io.encode_png(img[..., :1]).numpy())
    np.testing.assert_array_equal(gray, np.repeat(img[..., :1], 3, axis=2))
    # Other formats go through FFmpeg's image demuxer: a BMP made by FFmpeg's encoder.
    import av

    ctx = av.CodecContext.create("bmp", "w")
    ctx.width, ctx.height, ctx.pix_fmt = img.shape[1], img.shape[0], "bgr24"
    frame = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="bgr24")
    bmp = b"".join(bytes(p) for p in ctx.encode(frame) + ctx.encode(None))
    assert bmp.startswith(b"BM")
    np.testing.assert_array_equal(decode_image(bmp), img)


# --------------------------------------------------------------------------- the converter


def box_structure(data, start=0, end=None, parent=""):
    """Box order, versions, flags, hdlr names and mime strings: what must match the original tools."""
    out = []
    end = len(data) if end is None else end
    full = {
        "mvhd",
        "tkhd",
        "mdhd",
        "hdlr",
        "nmhd",
        "vmhd",
        "dref",
        "url ",
        "stsd",
        "stts",
        "stsc",
        "stsz",
        "stco",
        "co64",
    }
    for b in parse_boxes(data, start, end):
        entry = [b.path]
        if b.type in full:
            entry.append(b.full_header())
        p = bytes(b.payload())
        if b.type == "hdlr":
            entry.append((p[8:12], p[24:].rstrip(b"\0")))
        if b.type in ("moov", "trak", "mdia", "minf", "dinf", "stbl"):
            entry.append(box_structure(data, b.payload_offset, b.offset + b.size, b.path))
        if b.type == "dref" or b.type == "stsd":
            kids = []
            for k in b.children(8):
                kp = bytes(k.payload())
                if k.type == "mett":
                    kids.append(("mett", kp[8:].split(b"\0")[:2]))
                elif k.type == "hvc1":
                    kids.append(("hvc1", [c.type for c in k.children(78)]))
                else:
                    kids.append((k.type, k.full_header()))
            entry.append(kids)
        out.append(entry)
    return out


def nested(f, i):
    return f.sample_bytes(i)


@pytest.fixture(scope="module")
def photos(original_fixture):
    """The pictures an original-tools fixture was made from, by the names stored in it."""
    samples = original_fixture.manifest["samples"][:N_PHOTOS]
    return {s["filename"]: (original_fixture.folder / s["source"]["file"]).read_bytes() for s in samples}


@pytest.fixture(scope="module")
def converted(photos, tmp_path_factory):
    """The photographs as classic ImageNet TFRecords, converted with 2 workers at the defaults."""
    folder = tmp_path_factory.mktemp("tfr")
    names = list(photos)
    records = [
        example({"image/encoded": photos[n], "image/class/label": i % 4 + 1, "image/filename": n.encode()})
        for i, n in enumerate(names)
    ]
    write_tfrecord(folder / "train-00000-of-00001", records)
    out = folder / "photos.bzna"
    summary = convert(
        TFRecordSource(str(folder / "train-*"), label_offset=-1),
        out,
        workers=2,
        order="source",
        progress=False,
    )
    return out, summary, names


@pytest.mark.every_original
def test_converted_file_reads_back(converted, photos):
    out, summary, names = converted
    assert summary.images == len(names) and summary.skipped == [] and summary.targets == (0, 3)
    assert summary.bytes == os.path.getsize(out)
    with BznaFile(out) as f:
        assert f.filenames() == names
        assert f.targets.tolist() == [i % 4 for i in range(len(names))]
        for i, n in enumerate(names):
            s = f.sample(i)
            h, w = decode_image(photos[n]).shape[:2]
            assert s.input.size == (w, h)
            assert s.input.coded_size == (-(-w // 512) * 512, -(-h // 512) * 512)
            assert s.has_separate_thumb == (thumbnail_size((w, h)) is not None)
            assert s.thumb.coded_size == ((512, 512) if s.has_separate_thumb else s.input.coded_size)


@pytest.mark.every_original
def test_converted_file_has_the_original_tools_box_structure(converted, original_path):
    out, _, names = converted
    with BznaFile(original_path) as orig, BznaFile(out) as ours:
        a, b = original_path.read_bytes(), out.read_bytes()
        top_a = parse_boxes(a, 0, len(a))
        top_b = parse_boxes(b, 0, len(b))
        # Ours adds bzna_tf's metadata and checksum boxes after moov (uuid boxes the original tools skip).
        assert [x.type for x in top_a] == [x.type for x in top_b][:3] == ["ftyp", "mdat", "moov"]
        assert [x.type for x in top_b][3:] == ["uuid", "uuid"] and ours.metadata["conversion"][
            "num_shards"
        ] == 1
        assert ours.checksums.supported and ours.check_index() == []
        assert bytes(top_a[0].payload()) == bytes(top_b[0].payload())
        moov_a, moov_b = top_a[2], top_b[2]
        assert box_structure(a, moov_a.offset, moov_a.offset + moov_a.size) == box_structure(
            b, moov_b.offset, moov_b.offset + moov_b.size
        )
        # Nested mp4s: one that fits 512x512 and one with its own thumbnail, on both sides.
        for pick in (
            lambda f, i: not f.sample(i).has_separate_thumb,
            lambda f, i: f.sample(i).has_separate_thumb,
        ):
            i = next(i for i in range(len(orig)) if pick(orig, i))
            j = next(j for j in range(len(ours)) if pick(ours, j))
            assert box_structure(nested(orig, i)) == box_structure(nested(ours, j))


def reconstruct(picture, size):
    """A decoded picture as the loader sees it: identity warp of its planes to (width, height)."""
    y, cb, cr = decode_annexb(picture.annexb())
    return warp_yuv420(y, cb, cr, np.eye(3), (size[1], size[0])).numpy()


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return np.inf if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.every_original
def test_thumbnail_psnr_against_the_resized_sources(converted, photos):
    out, _, names = converted
    figures = []
    with BznaFile(out) as f:
        for i, n in enumerate(names):
            s = f.sample(i)
            src = decode_image(photos[n])
            ref = resize_rgb(src, s.thumb.size) if s.has_separate_thumb else src
            ours = psnr(reconstruct(s.thumb, s.thumb.size), ref)
            # What 4:2:0 alone costs (no H.265): the format's ceiling for this picture.
            cw, ch = s.thumb.coded_size
            planes = rgb_to_yuv420(ref, (cw, ch))
            ceiling = psnr(
                warp_yuv420(
                    planes[:ch],
                    planes[ch : ch + ch // 4].reshape(ch // 2, cw // 2),
                    planes[ch + ch // 4 :].reshape(ch // 2, cw // 2),
                    np.eye(3),
                    ref.shape[:2],
                ).numpy(),
                ref,
            )
            figures.append((n, ours, ceiling))
    print("\n".join(f"{n}: {p:.1f} dB (4:2:0 ceiling {c:.1f} dB)" for n, p, c in figures))
    values = np.array([p for _, p, _ in figures])
    # The default quality ("training") stores about a JPEG quality-90 copy's PSNR: measured 36.7 dB on
    # average, 32.5 to 40.6 dB per picture on ImageNet's fixture (tests/test_quality.py compares it with
    # JPEG itself), where 4:2:0 with averaged chroma alone keeps 34.7 to 55.6 dB.
    print(f"mean {values.mean():.2f} min {values.min():.2f}")
    assert values.mean() >= 36.0 and values.min() >= 32.0


def test_padding_is_an_edge_smear():
    img = gradient(37, 53, seed=3)
    img[:, -1] = [250, 10, 10]
    img[-1, :] = [10, 250, 10]
    planes = rgb_to_yuv420(img, (64, 48))
    y = planes[:48]
    np.testing.assert_array_equal(y[:37, 53:], np.repeat(y[:37, 52:53], 11, axis=1))
    np.testing.assert_array_equal(y[37:, :], np.repeat(y[36:37, :], 11, axis=0))
    # And in an encoded picture, the decoded padding follows the image's last column and row.
    dy, _, _ = decode_annexb(_annexb(img))
    assert np.abs(dy[:37, 53:].astype(int) - dy[:37, 52:53].astype(int)).max() <= 3
    assert np.abs(dy[37:, :53].astype(int) - dy[36:37, :53].astype(int)).max() <= 3


def _annexb(img):
    from bzna_tf.convert import encode_picture
    from bzna_tf.format.hevc import to_annexb

    p = encode_picture(img, preset="ultrafast", crf=4)
    return to_annexb(p.sample, p.hvcc)


def test_undecodable_images_stop_the_conversion_or_are_skipped_and_counted(tmp_path, small_images):
    good = [Item(f"{i}.jpg", i, data=jpeg(im), origin=f"item {i}") for i, im in enumerate(small_images[:3])]
    broken = Item("broken.jpg", 9, data=b"\xff\xd8 this is not a JPEG", origin="the broken one")
    items = [good[0], broken, good[1], good[2]]
    # The default stops at it, naming it and the two ways on; nothing is left under the name.
    with pytest.raises(ConversionError) as e:
        convert(items, tmp_path / "raise.bzna", workers=0, order="source", progress=False, log=None)
    assert str(e.value).startswith("the broken one: FFmpeg cannot decode it")
    assert "--on-error skip (on_error='skip')" in str(e.value) and "--lenient" in str(e.value)
    assert not list(tmp_path.iterdir())  # no partial file left behind
    # With lenient decoding it still stops (it is no JPEG at all), without suggesting --lenient again.
    with pytest.raises(ConversionError, match="the broken one") as e:
        convert(items, tmp_path / "raise.bzna", workers=0, order="source", progress=False, log=None,
                encoding=EncodeOptions(preset="ultrafast", lenient=True))  # fmt: skip
    assert "--lenient" not in str(e.value)
    out = tmp_path / "x.bzna"
    summary = convert(items, out, workers=0, order="source", on_error="skip", progress=False, log=None)
    assert summary.images == 3 and [o for o, _ in summary.skipped] == ["the broken one"]
    assert "skipped 1 image that could not be read or decoded" in str(summary)
    assert "the broken one" in str(summary)
    with BznaFile(out) as f:
        assert f.filenames() == ["0.jpg", "1.jpg", "2.jpg"]
    import io

    log = io.StringIO()
    convert(items, tmp_path / "bar.bzna", workers=0, order="source", on_error="skip", progress=True, log=log)
    assert "skipped the broken one: FFmpeg cannot decode it" in log.getvalue()  # no terminal: no bar
    (tmp_path / "bar.bzna").unlink()
    assert [p.name for p in tmp_path.iterdir()] == ["x.bzna"]


def test_unlabelled_images_must_come_last_unless_given_a_target(tmp_path, small_images):
    items = [Item("a.jpg", None, data=jpeg(small_images[0])), Item("b.jpg", 1, data=jpeg(small_images[1]))]
    with pytest.raises(ValueError, match="missing_label"):
        convert(items, tmp_path / "x.bzna", workers=0, order="source", progress=False)
    assert not (tmp_path / "x.bzna").exists()
    convert(items, tmp_path / "y.bzna", workers=0, order="source", progress=False, missing_label=-1)
    with BznaFile(tmp_path / "y.bzna") as f:
        # -1 is stored (targets are a prefix) but is no class: 2 targets, 1 labelled (issue 25 item 4)
        assert f.targets.tolist() == [-1, 1] and f.num_targets == 2 and f.num_labelled == 1
    convert(items[::-1], tmp_path / "z.bzna", workers=0, order="source", progress=False)
    with BznaFile(tmp_path / "z.bzna") as f:
        assert f.targets.tolist() == [1, -1] and f.num_labelled == 1


def test_thumbnails_only(tmp_path):
    big = gradient(600, 900, seed=1)
    out = tmp_path / "t.bzna"
    convert(
        [Item("big.jpg", 0, data=jpeg(big))],
        out,
        workers=0,
        encoding=EncodeOptions(thumbnails_only=True, preset="ultrafast"),
        progress=False,
    )
    with BznaFile(out) as f:
        s = f.sample(0)
        assert s.input.size == thumbnail_size((900, 600)) == (512, 341)
        assert s.input.coded_size == (512, 512) and not s.has_separate_thumb


def test_interrupt_leaves_no_file(tmp_path, small_images):
    def items():
        yield Item("a.jpg", 0, data=jpeg(small_images[0]))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        convert(items(), tmp_path / "x.bzna", workers=1, order="source", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_workers_give_the_same_file_in_input_order(tmp_path, small_images):
    items = [Item(f"{i}.jpg", i, data=jpeg(im)) for i, im in enumerate(small_images)]
    fast = EncodeOptions(preset="ultrafast")
    one = convert(items, tmp_path / "1.bzna", workers=1, encoding=fast, order="source", progress=False)
    two = convert(items, tmp_path / "2.bzna", workers=2, encoding=fast, order="source", progress=False)
    assert one.images == two.images == len(items)
    assert (tmp_path / "1.bzna").read_bytes() == (tmp_path / "2.bzna").read_bytes()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"workers": -1}, "workers"),
        ({"missing_label": "x"}, "missing_label"),
        ({"missing_label": 7}, "Expected a negative `missing_label`"),  # class 7, trained on as such
        ({"missing_label": 0}, "would be trained on as class 0"),
        ({"order": "random"}, "order"),
        ({"seed": -1}, "seed"),
        ({"negative_labels": "drop"}, "negative_labels"),
    ],
)
def test_argument_errors(tmp_path, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        convert([], tmp_path / "x.bzna", progress=False, **kwargs)


def test_nvenc_is_refused_clearly_without_a_gpu(tmp_path):
    from bzna_tf.convert.nvenc import nvenc_error

    if nvenc_error() is None:
        pytest.skip("PyNvVideoCodec loads here: the GPU tests cover NVENC")
    with pytest.raises(ConversionError, match="NVENC encoder is unavailable"):
        convert([], tmp_path / "x.bzna", encoding=EncodeOptions(encoder="nvenc"), progress=False)


def test_cli_convert_folder(tmp_path, small_images):
    for cls in ("a", "b"):
        (tmp_path / "in" / cls).mkdir(parents=True)
        for i in range(2):
            (tmp_path / "in" / cls / f"{i}.jpg").write_bytes(jpeg(small_images[i]))
    out = tmp_path / "out.bzna"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bzna_tf.cli",
            "convert",
            "folder",
            str(tmp_path / "in"),
            str(out),
            "--processes",
            "1",
            "--preset",
            "ultrafast",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "4 images" in r.stdout and "order: shuffled with seed 0" in r.stdout
    with BznaFile(out) as f:
        assert sorted(zip(f.filenames(), f.targets.tolist(), strict=True)) == [
            ("a/0.jpg", 0),
            ("a/1.jpg", 0),
            ("b/0.jpg", 1),
            ("b/1.jpg", 1),
        ]
    bad = subprocess.run(
        [sys.executable, "-m", "bzna_tf.cli", "convert", "tfrecord", str(tmp_path / "none-*"), str(out)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "no TFRecord file matches" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_tfrecord_example_script(tmp_path):
    script = __import__("pathlib").Path(__file__).parent.parent / "examples" / "tfrecord_to_bzna.py"
    out = tmp_path / "demo.bzna"
    r = subprocess.run(
        [sys.executable, str(script), "--demo", str(out), "--processes", "2"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "40 images" in r.stdout and "targets 0..9" in r.stdout
    with BznaFile(out) as f:  # shuffled: each demo_i.JPEG keeps its label i % 10
        assert sorted(f.filenames()) == sorted(f"demo_{i}.JPEG" for i in range(40))
        assert [int(n[5:-5]) % 10 for n in f.filenames()] == f.targets.tolist()
        assert f.filenames() != [f"demo_{i}.JPEG" for i in range(40)]
