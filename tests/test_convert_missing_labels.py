"""A missing label stops a conversion (or is skipped, or stored unlabelled if asked); summaries count labels.

Issue 34, items 2 and 3: a WebDataset shard whose first sample had no ``.cls``
was stored wholly unlabelled (exit 0, one note), and a ``.cls`` missing from a
later sample made that image unlabelled without a word (only ``bzna-tf info``
showed it). Now one sample has no say over the others' labels: a sample whose
label is missing is a bad record in every source (``--on-error skip`` skips
it, ``--allow-unlabelled`` stores it unlabelled), and every summary says how
many images are labelled, unlabelled (and why) and skipped.
"""

import json

import numpy as np
import pytest
from _sources_data import images, write_shards

from bzna_tf.cli import main
from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    GulpSource,
    ImageFolderSource,
    TFRecordSource,
    WebDatasetSource,
    convert,
)
from bzna_tf.format import BznaFile

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}
CLI = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


def shard(tmp_path, name, without_cls):
    """One shard of 6 samples (labels i % 3) where the samples ``without_cls`` have no cls member."""
    pics = images(6)
    samples = [
        {"ppm": p, **({} if i in without_cls else {"cls": str(i % 3).encode()})} for i, p in enumerate(pics)
    ]
    return write_shards(tmp_path / name, samples, per_shard=6)[0]


@pytest.mark.parametrize("missing", [0, 3], ids=["first-sample", "later-sample"])
def test_a_webdataset_sample_without_cls_stops_naming_it_or_is_skipped_or_stored_unlabelled(
    tmp_path, capsys, missing
):
    path = shard(tmp_path, "wds", {missing})
    key = f"{missing:05d}"
    src = WebDatasetSource(str(path))
    # The label is the cls member whichever sample lacks it: one sample does not decide for the others.
    assert src.label_key == "cls" and src.notes == ()
    assert src.item(missing).error.startswith(f"no label: no 'cls' member (the sample has members {key}.ppm)")
    # Stopped before any image is encoded (wherever the shuffle puts it), naming the shard and the key.
    out = tmp_path / "out.bzna"
    with pytest.raises(ConversionError) as e:
        convert(src, out, workers=0, **FAST)
    assert str(e.value) == (
        f"{path} key '{key}': no label: no 'cls' member (the sample has members {key}.ppm); "
        "--allow-unlabelled (allow_unlabelled=True) stores such images unlabelled, after the labelled ones; "
        "--on-error skip (on_error='skip') leaves such records out and counts them in the summary"
    )
    assert not out.exists() and not list(tmp_path.glob(".*.partial"))
    argv = ["convert", "webdataset", str(path), str(out), *CLI]
    assert main(argv) == 1
    assert capsys.readouterr().err == f"bzna-tf convert: {e.value}\n"
    # --on-error skip: skipped, and counted.
    assert main([*argv, "--on-error", "skip"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 5 labelled, 0 unlabelled, 1 skipped\n" in printed
    assert f"  {path} key '{key}': no label: no 'cls' member" in printed
    with BznaFile(out) as f:
        assert len(f) == 5 and f.num_labelled == 5 and key not in f.filenames()
    # --allow-unlabelled: stored unlabelled (last: the shard's members say which before reading), and counted.
    assert main([*argv, "--allow-unlabelled", "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 5 labelled, 1 unlabelled\n" in printed
    assert (
        f"  unlabelled: 1 image without a 'cls' member (--allow-unlabelled), {path} key '{key}'\n" in printed
    )
    with BznaFile(out) as f:
        assert (len(f), f.num_labelled) == (6, 5) and f.filenames()[-1] == key
        labels = dict(zip(f.filenames()[:5], f.targets.tolist()[:5], strict=True))
        assert labels == {f"{i:05d}": i % 3 for i in range(6) if i != missing}
    assert main(["info", str(out)]) == 0
    assert "samples   6 (5 labelled, 1 unlabelled)" in capsys.readouterr().out


def test_the_automatic_label_of_webdataset_looks_at_every_sample(tmp_path):
    pics = images(4)
    # Only the last sample's json has a label field: json:label, and the others are missing theirs.
    samples = [
        {"ppm": p, "json": json.dumps({"i": i} if i < 3 else {"label": 1}).encode()}
        for i, p in enumerate(pics)
    ]
    write_shards(tmp_path / "j", samples, per_shard=4)
    src = WebDatasetSource(str(tmp_path / "j" / "*.tar"))
    assert src.label_key == "json:label" and src.missing_labels() is None  # known only by reading the json
    hint = "--allow-unlabelled (allow_unlabelled=True) stores such images unlabelled, after the labelled ones"
    assert [it.error for it in src][:3] == [f"no label: member {i:05d}.json has no field 'label'; {hint}"
                                            for i in range(3)]  # fmt: skip
    allowed = WebDatasetSource(str(tmp_path / "j" / "*.tar"), allow_unlabelled=True)
    got = list(allowed)
    assert [it.target for it in got] == [None, None, None, 1]
    assert got[0].unlabelled == "without a 'label' field in a json member (--allow-unlabelled)"
    s = convert(allowed, tmp_path / "j.bzna", workers=0, order="source", missing_label=-1, **FAST)
    assert s.labelled == 1 and s.unlabelled == {got[0].unlabelled: [3, got[0].origin]}
    # cls.txt in one sample only: the label, the others are missing theirs.
    write_shards(tmp_path / "t", [{"ppm": pics[0]}, {"ppm": pics[1], "cls.txt": b"2"}], per_shard=2)
    src = WebDatasetSource(str(tmp_path / "t" / "*.tar"))
    assert src.label_key == "cls.txt" and list(src.missing_labels()) == [0]
    # No sample with a label anywhere: unlabelled, and the summary says so and why.
    write_shards(tmp_path / "n", [{"ppm": p} for p in pics], per_shard=4)
    src = WebDatasetSource(str(tmp_path / "n" / "*.tar"))
    assert src.label_key is None and src.notes[0].startswith(
        "no label: no sample has a cls or cls.txt member"
    )
    s = convert(src, tmp_path / "n.bzna", workers=0, **FAST)
    assert s.labelled == 0 and list(s.unlabelled) == [
        "without a label: no sample has a cls or cls.txt member or a json 'label' field"
    ]
    assert "labels: 0 labelled, 4 unlabelled" in str(s)


def test_allow_unlabelled_is_part_of_what_a_resumed_conversion_checks(tmp_path):
    path = shard(tmp_path, "wds", {2})
    out = tmp_path / "r" / "x.bzna"
    s = convert(WebDatasetSource(str(path)), out, num_shards=2, workers=0, on_error="skip", **FAST)
    assert len(s.written) == 2 and len(s.skipped) == 1
    again = convert(WebDatasetSource(str(path)), out, num_shards=2, workers=0, on_error="skip", **FAST)
    assert again.written == [] and len(again.finished) == 2
    # The shard that skipped the sample would hold it with allow_unlabelled: another conversion.
    with pytest.raises(ConversionError, match="written by a conversion with other sources or options"):
        convert(WebDatasetSource(str(path), allow_unlabelled=True), out, num_shards=2, workers=0, **FAST)


def tfrecords(path, labels):
    """Classic-layout TFRecords of small images; a None label leaves the feature out."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as w:
        for i, (label, pic) in enumerate(zip(labels, images(len(labels)), strict=True)):
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[pic])),
                "image/filename": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[f"{i}.ppm".encode()])
                ),
            }
            if label is not None:
                feature["image/class/label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def test_a_tfrecord_without_its_label_feature_stops_or_is_stored_unlabelled(tmp_path, capsys):
    path = tfrecords(tmp_path / "train-00000-of-00001", [0, 1, None, 2])
    with pytest.raises(
        ConversionError, match=r"record 2 \(byte \d+\): no label: no 'image/class/label' feature"
    ):
        convert(
            TFRecordSource(str(path), label_offset=0), tmp_path / "x.bzna", workers=0, order="source", **FAST
        )
    assert (
        TFRecordSource(str(path), label_offset=0).missing_labels() is None
    )  # known only by reading the records
    argv = [
        "convert",
        "tfrecord",
        str(path),
        str(tmp_path / "t.bzna"),
        *CLI,
        "--order",
        "source",
        "--label-offset",
        "0",
    ]
    assert main([*argv, "--allow-unlabelled", "--missing-label", "-1"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 3 labelled, 1 unlabelled\n" in printed
    assert (
        f"  unlabelled: 1 image without the 'image/class/label' feature (--allow-unlabelled), {path} record 2"
        in printed
    )
    assert main([*argv, "--label-key", "", "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 0 labelled, 4 unlabelled\n" in printed
    assert "  unlabelled: 4 images without a label (--label-key '', label_key=None), the first " in printed


def test_parquet_and_hf_null_labels_stop_before_any_work_or_are_stored_unlabelled(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow", reason="Parquet sources need pyarrow")
    from _sources_data import write_parquet

    from bzna_tf.convert import HFSource, ParquetSource

    path = write_parquet(tmp_path / "p.parquet", images(4), [0, None, 1, 2], row_group_size=2)
    src = ParquetSource(path)
    assert list(src.missing_labels()) == [1] and src.labelled().all()
    with pytest.raises(
        ConversionError, match=r"p.parquet row 1 \(row group 0\): no label: its label is null"
    ):
        convert(src, tmp_path / "x.bzna", workers=0, **FAST)
    assert not (tmp_path / "x.bzna").exists()
    argv = ["convert", "parquet", str(path), str(tmp_path / "p.bzna"), *CLI]
    assert main([*argv, "--on-error", "skip"]) == 0
    assert "labels: 3 labelled, 0 unlabelled, 1 skipped\n" in capsys.readouterr().out
    assert main([*argv, "--allow-unlabelled", "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 3 labelled, 1 unlabelled\n" in printed
    assert (
        f"  unlabelled: 1 image with a null label (column 'label', --allow-unlabelled), {path} row 1"
        in printed
    )
    # A save_to_disk folder (written here with pyarrow, as datasets writes it) reads its labels the same way.
    folder = tmp_path / "saved"
    folder.mkdir()
    table = pa.parquet.read_table(path)
    with pa.ipc.new_stream(folder / "data-00000-of-00001.arrow", table.schema) as w:
        w.write_table(table)
    (folder / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})
    )
    hf = HFSource(folder)
    assert list(hf.missing_labels()) == [1]
    with pytest.raises(ConversionError, match=r"row 1 \(record batch 0\): no label: its label is null"):
        convert(hf, tmp_path / "h.bzna", workers=0, **FAST)
    s = convert(HFSource(folder, allow_unlabelled=True), tmp_path / "h.bzna", workers=0, **FAST)
    assert s.labelled == 3 and [k for k, _ in s.unlabelled.values()] == [1]


def test_gulp_videos_without_a_label_and_folders_count_their_unlabelled_images(tmp_path, capsys):
    from _sources_data import gradient
    from test_convert import write_gulp_chunk

    frames = [gradient(16, 16, seed=i) for i in range(3)]
    write_gulp_chunk(tmp_path / "g", 0, {"a": (1, frames[:2]), "b": (None, frames[2:])})
    src = GulpSource(tmp_path / "g")
    assert src.label_key == "label" and list(src.missing_labels()) == [2]
    with pytest.raises(
        ConversionError, match=r"video b frame 0: no label: video 'b' has no 'label' in its meta_data"
    ):
        convert(src, tmp_path / "x.bzna", workers=0, **FAST)
    s = convert(GulpSource(tmp_path / "g", allow_unlabelled=True), tmp_path / "g.bzna", workers=0, **FAST)
    assert s.labelled == 2 and list(s.unlabelled) == [
        "whose video's meta_data has no 'label' (--allow-unlabelled)"
    ]
    # No video with a label: unlabelled, said in the summary.
    write_gulp_chunk(tmp_path / "n", 0, {"a": (None, frames)})
    src = GulpSource(tmp_path / "n")
    assert src.label_key is None and "no video's meta_data has a 'label'" in src.notes[0]
    assert convert(src, tmp_path / "n.bzna", workers=0, order="source", **FAST).unlabelled == {
        "without a label: no video's meta_data has a 'label'": [
            3,
            f"{tmp_path / 'n' / 'data_0.gulp'} video a frame 0",
        ]
    }
    # A folder: the images beside the class folders, counted with their reason.
    for name in ("ant", "bee"):
        (tmp_path / "f" / name).mkdir(parents=True)
        (tmp_path / "f" / name / "0.ppm").write_bytes(images(1)[0])
    (tmp_path / "f" / "loose.ppm").write_bytes(images(1)[0])
    s = convert(
        ImageFolderSource(tmp_path / "f", allow_unlabelled=True), tmp_path / "f.bzna", workers=0, **FAST
    )
    assert s.labelled == 2 and s.unlabelled == {
        "beside the class folders (--allow-unlabelled)": [1, str(tmp_path / "f" / "loose.ppm")]
    }
    assert "labels: 2 labelled, 1 unlabelled\n  unlabelled: 1 image beside the class folders" in str(s)


def test_negative_labels_made_unlabelled_are_counted_with_their_reason(tmp_path):
    path = tfrecords(tmp_path / "n.rec", [0, 1, -1])
    s = convert(TFRecordSource(str(path), label_offset=0), tmp_path / "n.bzna", workers=0, order="source",
                negative_labels="unlabelled", **FAST)  # fmt: skip
    first = f"{path} record 2 (byte {_offset(path, 2)})"
    assert s.labelled == 2 and s.unlabelled == {
        "with a negative label (--negative-labels unlabelled)": [1, first]
    }


def _offset(path, k):
    from bzna_tf.convert.tfrecord import record_offsets

    return int(np.asarray(record_offsets(str(path)))[k])
