"""Several files as one dataset, the ImageNet split ranges, and `bzna-tf info`."""

import json
import re
import subprocess
import sys

import pytest

from bzna_tf.cli import main
from bzna_tf.format import (
    BznaFile,
    BznaShards,
    BznaWriter,
    imagenet_split,
    imagenet_splits,
    open_bzna,
    select_split,
)


@pytest.fixture(scope="module")
def shards(pictures, tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    plan = {"part-0.bzna": [(0, 4), (1, None)], "part-1.bzna": [(2, 9)], "part-2.bzna": [(1, 5), (0, 6)]}
    for name, items in plan.items():
        with BznaWriter(d / name) as w:
            for k, (p, t) in enumerate(items):
                inp, th = pictures[p]
                w.append(inp, thumb=th, target=t, filename=f"{name}-{k}.jpg")
    return d


def test_shards_concatenate_in_order(shards, pictures):
    # Three files, not one set of shards: a list reads them as one; a pattern opens one dataset.
    with pytest.raises(ValueError, match=r"the pattern '.*part-\*\.bzna' matches 3 datasets, not one"):
        open_bzna(str(shards / "part-*.bzna"))
    with open_bzna([shards / f"part-{k}.bzna" for k in range(3)]) as ds:
        assert isinstance(ds, BznaShards)
        assert len(ds) == 5 and ds.num_labelled == 4
        assert ds.targets.tolist() == [4, -1, 9, 5, 6]
        assert [ds.target(i) for i in range(5)] == [4, -1, 9, 5, 6]
        assert ds.filenames() == [
            "part-0.bzna-0.jpg",
            "part-0.bzna-1.jpg",
            "part-1.bzna-0.jpg",
            "part-2.bzna-0.jpg",
            "part-2.bzna-1.jpg",
        ]
        assert [ds.locate(i) for i in range(5)] == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
        assert ds.locate(-1) == (2, 1)
        assert [ds.sample(i).input.sample for i in range(5)] == [
            pictures[p][0].sample for p in (0, 1, 2, 1, 0)
        ]
        assert ds.filename(3) == "part-2.bzna-0.jpg"
        with pytest.raises(IndexError):
            ds.sample(5)


def test_shards_from_a_list_keep_its_order(shards):
    # Files numbered alike in neither their names' nor their numbers' order: an unsorted listing? A warning.
    with pytest.warns(UserWarning, match="files numbered alike listed out of order"):
        with open_bzna([shards / "part-2.bzna", shards / "part-0.bzna"]) as ds:
            assert ds.targets.tolist() == [5, 6, 4, -1]


def test_glob_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file matches"):
        open_bzna(str(tmp_path / "*.bzna"))


def test_single_path_opens_one_file(shards):
    with open_bzna(shards / "part-1.bzna") as f:
        assert isinstance(f, BznaFile) and len(f) == 1


@pytest.mark.parametrize("n", [1_431_167, 1_431_000, 150_000])
def test_imagenet_splits(n):
    train, val, test = (imagenet_split(s, n) for s in ("train", "val", "test"))
    assert (len(val), len(test)) == (50_000, 100_000)
    assert train.start == 0 and train.stop == val.start and val.stop == test.start and test.stop == n
    assert imagenet_split("validation", n) == val
    if n == 1_431_167:
        # SPEC: entries 1..1281167 train, 1281168..1331167 val, the rest test (1-based).
        assert (len(train), val.start, test.start) == (1_281_167, 1_281_167, 1_331_167)


def test_imagenet_split_errors():
    with pytest.raises(ValueError, match="Received: split='dev'"):
        imagenet_split("dev", 1_431_167)
    with pytest.raises(ValueError, match="Received: num_samples=12"):
        imagenet_split("train", 12)


def test_info_json(original_path, manifest, capsys):
    assert main(["info", str(original_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["samples"] == 12 and d["labelled"] == 9
    assert d["tracks"] == [
        {"name": "bzna_input", "handler": "meta", "samples": 12},
        {"name": "bzna_target", "handler": "meta", "samples": 9},
        {"name": "bzna_fname", "handler": "meta", "samples": 12},
        {"name": "bzna_thumb", "handler": "vide", "samples": 12},
    ]
    first, m = d["first"], manifest["samples"][0]
    assert (first["filename"], first["target"]) == (m["filename"], m["target"])
    assert first["input_size"] == m["image_size"] and first["thumb_size"] == m["thumb_size"]


def test_info_table(original_path, manifest, capsys):
    assert main(["info", str(original_path)]) == 0
    out = capsys.readouterr().out
    assert "12 (9 labelled, 3 unlabelled)" in out
    assert "bzna_thumb    vide     12" in out
    m = manifest["samples"][0]
    (w, h), (cw, ch) = m["image_size"], m["input_coded_size"]
    assert f"{m['filename']}  target {m['target']}  input {w}x{h} (coded {cw}x{ch})" in out


def test_info_several_files(shards, capsys):
    assert main(["info", str(shards / "part-*.bzna"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["samples"] == 5 and d["labelled"] == 4 and len(d["files"]) == 3
    assert d["files"][1]["first"]["input_size"] == [200, 620]
    assert d["files"][1]["first"]["thumb_size"] == [165, 512]
    # A pattern or a folder that matches one file: still the list (its shape does not depend on how
    # many match); one file named as such: its object.
    for arg in (str(shards / "part-0*.bzna"), str(shards / "part-0.bzna")):
        assert main(["info", arg, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert ("files" in d) == ("*" in arg) and (len(d["files"]) == 1 if "*" in arg else d["samples"] > 0)


def test_info_describes_a_file_whose_first_picture_is_damaged(original_path, tmp_path, capsys):
    # The index is intact: info describes it (the damage is verify's to report), where it printed the
    # checksum error alone.
    from bzna_tf.format import BznaFile, BznaWriter

    copy = tmp_path / "copy.bzna"
    with BznaFile(original_path) as f, BznaWriter(copy) as w:
        for i in range(len(f)):
            t = f.target(i)
            w.append_mp4(f.sample_bytes(i), target=None if t < 0 else t, filename=f.filename(i))
        s = f.sample(0, verify=False)
    data = bytearray(copy.read_bytes())
    with BznaFile(copy) as f:
        at = f.sample(0, verify=False).input.sample_offset + len(s.input.sample) // 2
    data[at] ^= 0x10
    copy.write_bytes(bytes(data))
    assert main(["info", str(copy)]) == 0
    assert "12 (9 labelled, 3 unlabelled)" in capsys.readouterr().out
    assert main(["verify", str(copy), "--progress", "none"]) == 1


def test_info_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.bzna"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x00" * 4)
    assert main(["info", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.bzna" in err and "byte offset 0" in err and "runs past the end of the file" in err
    # --json: one named file gives its object, {"file", "error"}; several give the list with "errors".
    assert main(["info", str(bad), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["file"] == str(bad) and "runs past the end of the file" in d["error"]
    assert main(["info", str(tmp_path / "*.bzna"), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["files"] == [] and d["samples"] == 0 and [e["file"] for e in d["errors"]] == [str(bad)]


def test_console_script_runs(original_path):
    r = subprocess.run(
        [sys.executable, "-m", "bzna_tf.cli", "info", str(original_path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(r.stdout)["samples"] == 12
    # The format layer must not pull TensorFlow in.
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, bzna_tf; bzna_tf.open_bzna(sys.argv[1]);print('tensorflow' in sys.modules)",
            str(original_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == "False"


def test_demo_example_makes_a_readable_file(tmp_path):
    out = tmp_path / "demo.bzna"
    script = __import__("pathlib").Path(__file__).parent.parent / "examples" / "make_demo_bzna.py"
    subprocess.run(
        [
            sys.executable,
            str(script),
            str(out),
            "--images",
            "5",
            "--unlabelled",
            "2",
            "--classes",
            "3",
            "--preset",
            "ultrafast",
        ],
        check=True,
        capture_output=True,
    )
    with BznaFile(out) as f:
        assert f.targets.tolist() == [0, 1, 2, -1, -1]
        assert f.filenames() == [f"demo_{i:05d}.png" for i in range(5)]
        for i in range(5):
            s = f.sample(i)
            assert s.has_separate_thumb == (max(s.input.size) > 512)
            assert max(s.thumb.size) <= 512


def test_split_specs_slice_like_tfds():
    sp = imagenet_splits(1_431_167)
    sel = lambda spec: select_split(spec, sp)  # noqa: E731
    assert len(sel("train[:10%]")) == 128_117  # round(128,116.7): TFDS' "closest" rounding
    assert sel("val[1000:2000]").tolist() == list(range(1_282_167, 1_283_167))
    assert len(sel("train+val")) == 1_331_167 and len(sel("all")) == 1_431_167
    assert sel("validation[:3]").tolist() == sel("val[:3]").tolist() == [1_281_167, 1_281_168, 1_281_169]
    assert sel("test[-2:]").tolist() == [1_431_165, 1_431_166] and sel(" test [ -1 ] ").tolist() == [
        1_431_166
    ]
    assert sel("val[:-49998]").tolist() == [1_281_167, 1_281_168]
    assert len(sel("val[0.5%:1.5%]")) == 500 and len(sel("val[:200000]")) == 50_000  # bounds clip
    assert sel("val[1:2]+val[:1]").tolist() == [1_281_168, 1_281_167]  # parts concatenate as given
    with pytest.raises(ValueError, match="selects 1 sample twice: its parts 'val\\[:1\\]' and 'val\\[:1\\]'"):
        sel("val[:1]+val[:1]")  # unlike TFDS, parts that share samples are refused
    # Nameless parts refer to the default split.
    assert select_split("[:50%]", {"all": range(23)}, default="all").tolist() == list(range(12))


def test_a_negative_percentage_is_the_complement_of_the_positive_one_for_every_size():
    # -p% is the boundary of (100 - p)%: [:90%] and [-10%:] always split the samples exactly. Rounded
    # alone (TFDS), -10% of 5 samples was -0 (the whole file as "the last 10%"), and a half rounded to
    # even went the other way than (100 - p)%'s (of 25 samples, sample 22 in neither part).
    for n in range(1, 101):
        every = {"all": range(n)}
        for p in (1, 5, 10, 12.5, 20, 25, 33.3, 50, 90, 99):
            head = [f"[:{100 - p}%]", f"[:-{p}%]"]
            for h in head:
                parts = []
                for spec in (h, f"[-{p}%:]"):
                    try:
                        parts += select_split(spec, every, default="all").tolist()
                    except ValueError as e:  # an empty part
                        assert "selects no samples" in str(e), (n, spec)
                assert parts == list(range(n)), (n, h, p)
    assert select_split("[-10%:]", {"all": range(5)}, default="all").tolist() == [4]

    # Fractional percentages, computed exactly: in floats, 10.8% and -89.2% of 125 samples were 14 and 112
    # (sample 13 in both parts), 0.4% and -99.6% left sample 0 out.
    def split(spec, n):
        try:
            return select_split(spec, {"all": range(n)}, default="all").tolist()
        except ValueError as e:
            assert "selects no samples" in str(e), (n, spec)
            return []

    for n in (*range(1, 301, 7), 125):
        for tenths in range(1, 1000, 7):
            p, q = f"{tenths / 10:.1f}", f"{(1000 - tenths) / 10:.1f}"
            assert split(f"[:{p}%]", n) + split(f"[-{q}%:]", n) == list(range(n)), (n, p, q)
    assert split("[:10.8%]", 125) + split("[-89.2%:]", 125) == list(range(125))


@pytest.mark.parametrize(
    "spec, match",
    [
        ("dev", "Unknown split 'dev'"),
        ("train[", "Expected a split such as"),
        ("train[1.5:]", "integer"),
        ("train[101%:]", "percentage"),
        ("val[50000]", "not a sample of split 'val'"),
        ("val[10%]", "not a sample"),
        ("val[10:5]", "selects no samples"),
        ("train++val", "Expected a split such as"),
        ("[:5]", "split name"),
        ("", "Expected a split such as"),
    ],
)
def test_split_spec_errors(spec, match):
    with pytest.raises(ValueError, match=re.escape(match) if "'" in match else match):
        select_split(spec, imagenet_splits(1_431_167))
    with pytest.raises(TypeError, match="string"):
        select_split(3, imagenet_splits(1_431_167))


def test_small_files_have_only_the_all_split():
    assert imagenet_splits(12) == {"all": range(12)}
