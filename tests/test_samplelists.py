"""LBANN sample lists (seed 003) over .bzna shards: every list type, inclusion, exclusion, malformed input."""

import os
import textwrap

import numpy as np
import pytest
from conftest import SHARD_SIZES, shard_sample

from bzna_tf import LIST_TYPES, ClassificationDataset, Dataset, SampleList, SampleListError
from bzna_tf.cli import main as cli

STARTS = np.concatenate([[0], np.cumsum(SHARD_SIZES)])

# The two examples of seed 003, verbatim.
SEED_INCLUSION = """CONDUIT_HDF5_INCLUSION
7 23 3
/p/vast1/data
file_1.h5 3 7 runid/002 runid/005 runid/011
file_2.h5 2 8 runid/005 runid/006
file_3.h5 2 8 runid/000 runid/002
"""
SEED_EXCLUSION = """CONDUIT_HDF5_EXCLUSION
61 3 3
/p/vast1/lbann/datasets/PROBIES/h5_data/
h5out_1.h5 18 2 RUN_ID/000000003 RUN_ID/000000021
h5out_2.h5 24 0
h5out_3.h5 19 1 RUN_ID/000000003
"""


def glob_index(k, i):
    return int(STARTS[k]) + i


def read_names(ds):
    """(shard, index) of every sample a ClassificationDataset pipeline yields, in order."""
    out = []
    for _, _, names in ds:
        out += [shard_sample(n) for n in names.numpy()]
    return out


def listed(d, lst, **kw):
    return read_names(d.as_dataset(batch_size=4, shape=8, sample_list=lst, with_filenames=True, **kw))


def write(tmp_path, text, name="list.txt"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


# ------------------------------------------------------------------------------------------ parsing


def test_the_seed_examples_parse_and_write_back_unchanged():
    inc = SampleList.parse(SEED_INCLUSION, path="inc.list")
    assert inc.type == "CONDUIT_HDF5_INCLUSION" and inc.base == "/p/vast1/data" and inc.label_file is None
    assert (inc.num_included, inc.num_excluded, len(inc.entries)) == (7, 23, 3)
    assert inc.entries[0].file == "file_1.h5" and inc.entries[0].ids == (
        "runid/002",
        "runid/005",
        "runid/011",
    )
    assert inc.entries[2].line == 6
    exc = SampleList.parse(SEED_EXCLUSION)
    assert exc.exclusion and (exc.num_included, exc.num_excluded) == (61, 3)
    assert exc.entries[1].ids == () and exc.entries[1].included == 24
    assert inc.to_text() == SEED_INCLUSION and exc.to_text() == SEED_EXCLUSION


def test_the_documented_example_parses():
    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "guides", "sample-lists.md")).read()
    text = page.split("cat > train.list <<'EOF'\nCONDUIT_HDF5_INCLUSION\n", 1)[1].split("EOF\n", 1)[0]
    lst = SampleList.parse("CONDUIT_HDF5_INCLUSION\n" + text)
    assert lst.entries[0].ids == ("n01440764_10026.JPEG", 0) and lst.entries[1].ids == (1, 2, 3, 7)


def test_ranges_and_ids():
    lst = SampleList.parse("MULTI-SAMPLE_INCLUSION_V2\n6 1\n/d\nf.bzna 6 3 ... 6 0 name.png\n")
    assert lst.entries[0].ids == (3, 4, 5, 6, 0, "name.png")  # all digits: an index; else a filename
    assert lst.to_text() == "MULTI-SAMPLE_INCLUSION_V2\n6 1\n/d\nf.bzna 6 3 ... 6 0 name.png\n"
    assert "3 4 5 6" in lst.to_text(ranges=False)
    assert SampleList.parse("multi-sample_inclusion_v2\n1 1\n/d\nf 1 0\n").type == "MULTI-SAMPLE_INCLUSION_V2"


# ------------------------------------------------------------------------- every type, written and read


@pytest.mark.parametrize("kind", LIST_TYPES)
@pytest.mark.parametrize("ids", ["indices", "names"])
def test_every_list_type_round_trips_through_as_dataset(flat_shards, tmp_path, kind, ids):
    d = ClassificationDataset(flat_shards)
    # a selection across the three files, in a scrambled order, leaving samples out of each file
    pos = np.array([glob_index(2, 8), glob_index(0, 1), glob_index(2, 0), glob_index(0, 6), glob_index(1, 3)])
    lst = d.select(pos).to_sample_list(kind, ids=ids)
    path = lst.write(tmp_path / f"{kind}.list")
    text = open(path).read()
    assert text.startswith(kind + "\n")
    again = SampleList.read(path)
    assert again.type == kind and again.to_text() == text
    assert again.base == os.path.dirname(flat_shards[0])
    got = listed(d, path)
    assert listed(d, lst) == got  # the list in memory, unwritten, selects the same
    expected = [(2, 8), (0, 1), (2, 0), (0, 6), (1, 3)]
    if kind == "SINGLE-SAMPLE":
        assert got == expected  # one line per sample: the list's order
    elif kind.endswith("INCLUSION") or kind.endswith("_V2"):
        assert got == [(2, 8), (2, 0), (0, 1), (0, 6), (1, 3)]  # grouped by file, in first-mention order
    else:
        assert got == sorted(expected, key=lambda s: ({2: 0, 0: 1, 1: 2}[s[0]], s[1]))  # file order
    assert sorted(got) == sorted(expected)
    # the labels come with them
    labels = np.concatenate([y.numpy() for _, y in d.as_dataset(batch_size=8, shape=8, sample_list=path)])
    assert labels.tolist() == [k for k, _ in got]


def test_hand_written_lists(flat_shards, tmp_path):
    d = ClassificationDataset(flat_shards)
    base = os.path.dirname(flat_shards[0])
    inc = write(
        tmp_path,
        f"""\
        CONDUIT_HDF5_INCLUSION
        6 8 2
        {base}
        part-1.bzna 2 3 s1_04.png 0
        part-2.bzna 4 5 1 ... 3 s2_07.png
        """,
    )
    assert listed(d, inc) == [(1, 4), (1, 0), (2, 1), (2, 2), (2, 3), (2, 7)]
    exc = write(
        tmp_path,
        f"""\
        MULTI-SAMPLE_EXCLUSION
        10 2 2
        {base}
        /labels/are/in/the/bzna
        part-0.bzna 5 2 s0_03.png 6

        part-1.bzna 5 0
        """,
        "exc.txt",
    )
    assert listed(d, exc) == [(0, 0), (0, 1), (0, 2), (0, 4), (0, 5)] + [(1, i) for i in range(5)]
    single = write(
        tmp_path,
        f"""\
        SINGLE-SAMPLE
        3
        {flat_shards[2]}
        -
        4
        s2_00.png
        8
        """,
        "single.txt",
    )  # the base is the .bzna file itself: each line an id
    assert listed(d, single) == [(2, 4), (2, 0), (2, 8)]
    single_dir = write(
        tmp_path, f"SINGLE-SAMPLE\n2\n{base}\n-\npart-1.bzna/s1_02.png\npart-0.bzna/6\n", "s2.txt"
    )
    assert listed(d, single_dir) == [(1, 2), (0, 6)]


def test_a_list_written_elsewhere_finds_its_files_by_their_trailing_path(flat_shards, tmp_path):
    d = ClassificationDataset(flat_shards)
    lst = write(tmp_path, "MULTI-SAMPLE_INCLUSION_V2\n2 1\n/p/vast1/data/shards\npart-2.bzna 2 5 6\n")
    assert listed(d, lst) == [(2, 5), (2, 6)]
    single = write(tmp_path, "SINGLE-SAMPLE\n1\n/p/vast1/data\n-\nshards/part-0.bzna/s0_02.png\n", "s.txt")
    assert listed(d, single) == [(0, 2)]


def test_a_file_of_this_machine_or_two_of_the_lists_files_never_stand_for_another_data_file(
    flat_shards, tmp_path
):
    # A list made for val/part-1.bzna (a file here) on a dataset of shards/part-1.bzna read the latter's
    # samples: training data where validation data was meant.
    import shutil

    d = ClassificationDataset(flat_shards)
    (tmp_path / "val").mkdir()
    shutil.copy(flat_shards[0], tmp_path / "val" / "part-1.bzna")  # another file of that name
    here = write(tmp_path, f"MULTI-SAMPLE_INCLUSION_V2\n1 1\n{tmp_path / 'val'}\npart-1.bzna 1 2\n")
    with pytest.raises(
        SampleListError, match=r"line 4: .*val/part-1.bzna is a file here, and not the data file"
    ):
        listed(d, here)
    # A copy of the data file (data staged to local disk, the list naming the original) is that file.
    (tmp_path / "staged").mkdir()
    shutil.copy(flat_shards[1], tmp_path / "staged" / "part-1.bzna")
    staged = write(
        tmp_path, f"MULTI-SAMPLE_INCLUSION_V2\n1 1\n{tmp_path / 'staged'}\npart-1.bzna 1 2\n", "s.list"
    )
    with pytest.warns(UserWarning, match="file name alone"):
        assert listed(d, staged) == [(1, 2)]
    # The same file by another path (a symlinked folder), on two lines: one file, not two.
    os.symlink(os.path.dirname(flat_shards[0]), tmp_path / "link")
    both = write(
        tmp_path,
        f"MULTI-SAMPLE_INCLUSION_V2\n2 2\n{tmp_path}\nlink/part-1.bzna 1 0\n{flat_shards[1]} 1 3\n",
        "both.list",
    )
    assert listed(d, both) == [(1, 0), (1, 3)]
    # From another machine: two of the list's files cannot both be one data file.
    two = write(
        tmp_path, "MULTI-SAMPLE_INCLUSION_V2\n2 2\n/p/vast1\nval/part-1.bzna 1 0\ntrain/part-1.bzna 1 1\n"
    )
    with pytest.warns(UserWarning, match="by its file name alone"):
        with pytest.raises(
            SampleListError, match="line 5: .*train/part-1.bzna and .*val/part-1.bzna both fit"
        ):
            listed(d, two)
    # A match by the file name alone is taken, and said.
    alone = write(tmp_path, "MULTI-SAMPLE_INCLUSION_V2\n1 1\n/p/vast1/val\npart-1.bzna 1 3\n")
    with pytest.warns(UserWarning, match=r"/p/vast1/val/part-1.bzna is not a file here; .* file name alone"):
        assert listed(d, alone) == [(1, 3)]


def test_a_list_keeps_the_repeats_of_an_oversampled_selection(flat_shards, tmp_path):
    d = ClassificationDataset(flat_shards).select([2, 0, 2, 1, 2, 0])
    lst = write(
        tmp_path, f"MULTI-SAMPLE_INCLUSION_V2\n2 1\n{os.path.dirname(flat_shards[0])}\npart-0.bzna 2 2 0\n"
    )
    assert d.indices[d.sample_list_positions(lst)].tolist() == [2, 2, 2, 0, 0]  # list order, each repeat
    assert sorted(listed(d, lst)) == [(0, 0), (0, 0), (0, 2), (0, 2), (0, 2)]


def test_an_oversampled_selection_is_no_list_to_write(flat_shards):
    # A reader refuses a sample named twice, and an exclusion list cannot say it: the writer refuses.
    d = ClassificationDataset(flat_shards).select([2, 0, 2, 1, 2, 0])
    for kind in ("CONDUIT_HDF5_INCLUSION", "CONDUIT_HDF5_EXCLUSION", "SINGLE-SAMPLE"):
        with pytest.raises(ValueError, match=r"repeat 2 samples \(global sample 2 3 times: oversampling\)"):
            d.to_sample_list(kind)
    assert d.select([1, 3, 2]).to_sample_list().entries[0].ids == ("0", "1", "2")


def test_a_relative_base_is_relative_to_the_list(flat_shards):
    shards_dir = os.path.dirname(flat_shards[0])
    lst_path = os.path.join(os.path.dirname(shards_dir), "rel.list")
    with open(lst_path, "w") as f:
        f.write("MULTI-SAMPLE_INCLUSION_V2\n1 1\nshards\npart-1.bzna 1 2\n")
    assert listed(ClassificationDataset(flat_shards), lst_path) == [(1, 2)]


def test_a_relative_base_given_to_the_writer_is_the_current_folder(flat_shards, tmp_path, monkeypatch):
    # `bzna-tf samplelist --base . -o lists/x.list` wrote "." on line 3, which a reader takes from the
    # list's folder: lists/part-1.bzna, another file (or none).
    shards_dir = os.path.dirname(flat_shards[0])
    monkeypatch.chdir(shards_dir)
    d = ClassificationDataset(flat_shards)
    lst = d.select([7, 8]).to_sample_list(base=".")
    assert lst.base == shards_dir
    os.makedirs(tmp_path / "lists")
    lst.write(tmp_path / "lists" / "x.list")
    assert listed(d, str(tmp_path / "lists" / "x.list")) == [(1, 0), (1, 1)]
    assert cli(["samplelist", *flat_shards, "--base", ".", "-o", str(tmp_path / "lists" / "y.list")]) == 0
    assert open(tmp_path / "lists" / "y.list").read().splitlines()[2] == shards_dir


def two_experiments(flat_shards, tmp_path):
    """exp1/data.bzna (a copy of part-0: 7 samples) and exp2/data.bzna (of part-2: 9 samples)."""
    import shutil

    for name, k in (("exp1", 0), ("exp2", 2)):
        (tmp_path / name).mkdir()
        shutil.copy(flat_shards[k], tmp_path / name / "data.bzna")
    return tmp_path / "exp1", tmp_path / "exp2"


def test_a_list_made_after_chdir_names_the_file_the_dataset_opened(flat_shards, tmp_path, monkeypatch):
    # A notebook's %cd: the list named exp2's data.bzna with exp1's indices, and exp2 then read other images.
    exp1, exp2 = two_experiments(flat_shards, tmp_path)
    monkeypatch.chdir(exp1)
    d = ClassificationDataset("data.bzna")
    monkeypatch.chdir(exp2)
    lst = d.select([1, 3]).to_sample_list()
    assert lst.base == str(exp1) and [e.file for e in lst.entries] == ["data.bzna"]
    assert (lst.entries[0].included, lst.entries[0].excluded) == (2, 5)
    lst.write("holdout.list")  # in exp2
    assert open(exp2 / "holdout.list").read().splitlines()[2] == str(exp1)
    assert listed(d, "holdout.list") == [(0, 1), (0, 3)]
    opened = ClassificationDataset.from_sample_list("holdout.list")
    assert opened.paths == [str(exp1 / "data.bzna")] and opened.filenames == ["s0_01.png", "s0_03.png"]


def test_a_list_made_before_chdir_still_fits_the_file_the_dataset_opened(flat_shards, tmp_path, monkeypatch):
    # It was refused: "exp1/data.bzna is a file here, and not the data file data.bzna" (exp2's, by then).
    exp1, exp2 = two_experiments(flat_shards, tmp_path)
    monkeypatch.chdir(exp1)
    d = ClassificationDataset("data.bzna")
    lst = d.select([2, 5]).to_sample_list()
    lst.write("holdout.list")
    monkeypatch.chdir(exp2)
    assert listed(d, lst) == [(0, 2), (0, 5)]
    assert listed(d, str(exp1 / "holdout.list")) == [(0, 2), (0, 5)]
    assert d.select(lst).filenames == ["s0_02.png", "s0_05.png"]
    assert d.sample_list_positions(lst).tolist() == [2, 5]


def test_a_list_read_from_a_relative_path_keeps_its_folder(flat_shards, tmp_path, monkeypatch):
    # Its relative base was taken from the working directory of each use: after a chdir, another file.
    exp1, exp2 = two_experiments(flat_shards, tmp_path)
    (exp1 / "rel.list").write_text("CONDUIT_HDF5_INCLUSION\n2 5 1\n.\ndata.bzna 2 5 4 6\n")
    monkeypatch.chdir(exp1)
    lst = SampleList.read("rel.list")
    d = ClassificationDataset(str(exp1 / "data.bzna"))
    monkeypatch.chdir(exp2)
    assert [os.path.normpath(p) for p in lst.data_paths()] == [str(exp1 / "data.bzna")]
    assert listed(d, lst) == [(0, 4), (0, 6)]
    assert ClassificationDataset.from_sample_list(lst).filenames == ["s0_04.png", "s0_06.png"]
    assert lst.path == "rel.list"  # errors name the list as given


@pytest.mark.parametrize("kind", ["CONDUIT_HDF5_INCLUSION", "MULTI-SAMPLE_INCLUSION"])
def test_an_inclusion_list_for_an_earlier_conversion_is_refused(flat_shards, tmp_path, kind):
    # Inclusion lines give the file's size too (included + excluded): a list of samples 0-2 of a 7-sample
    # file, applied after it was converted again with 9, selected 3 other samples without a word.
    import shutil

    path = tmp_path / "data.bzna"
    shutil.copy(flat_shards[0], path)
    lst = Dataset(str(path)).select([0, 1, 2]).to_sample_list(kind)
    lst.write(tmp_path / "old.list")
    assert (lst.entries[0].included, lst.entries[0].excluded) == (3, 4)
    shutil.copy(flat_shards[2], path)  # converted again: 9 samples
    d = Dataset(str(path))
    line = 5 if kind == "MULTI-SAMPLE_INCLUSION" else 4
    message = (
        f"{tmp_path / 'old.list'}, line {line}: data.bzna: 3 included + 4 excluded samples, but the data "
        f"file {path} holds 9 samples: the list was made for another file or an earlier conversion of this "
        "one (make the list again for this file)"
    )
    with pytest.raises(SampleListError) as e:
        d.select(SampleList.read(tmp_path / "old.list"))
    assert e.value.line == line and str(e.value) == message
    with pytest.raises(SampleListError, match=r"3 included \+ 4 excluded samples, but the data file"):
        d.select(lst)  # the list in memory, its lines unnumbered
    # MULTI-SAMPLE_INCLUSION_V2 gives no excluded count: nothing to check the file's size against.
    v2 = Dataset(str(path)).select([0, 1, 2]).to_sample_list("MULTI-SAMPLE_INCLUSION_V2")
    assert d.select(v2).indices.tolist() == [0, 1, 2]


def test_a_list_narrows_a_split_and_opens_its_own_files(flat_shards, tmp_path):
    lst = write(
        tmp_path,
        f"MULTI-SAMPLE_INCLUSION_V2\n4 2\n{os.path.dirname(flat_shards[0])}\npart-0.bzna 2 0 6\n"
        "part-2.bzna 2 0 8\n",
    )
    first_half = ClassificationDataset(flat_shards, split="[:50%]")  # files 0 and part of 1
    assert listed(first_half, lst) == [(0, 0), (0, 6)]
    with pytest.raises(SampleListError, match=r"none of the listed samples \(4 samples\) is in this dataset"):
        ClassificationDataset(flat_shards, split="[7:12]").as_dataset(batch_size=2, shape=8, sample_list=lst)
    opened = ClassificationDataset.from_sample_list(lst)
    assert opened.paths == [flat_shards[0], flat_shards[2]] and len(opened) == 4
    assert [shard_sample(n) for n in opened.filenames] == [(0, 0), (0, 6), (2, 0), (2, 8)]
    assert Dataset(flat_shards).select(SampleList.read(lst)).indices.tolist() == [0, 6, 12, 20]


# ------------------------------------------------------------------------------------------ malformed

BAD = [
    ("", 1, "expected the list type.*found nothing"),
    ("HDF5_LIST\n1 1\n/d\n", 1, "unknown list type 'HDF5_LIST'"),
    (
        "CONDUIT_HDF5_INCLUSION\n1 1\n/d\nf 1 0 0\n",
        2,
        r"expected 3 non-negative integers \(included samples, excl",
    ),
    ("CONDUIT_HDF5_INCLUSION\n1 x 1\n/d\nf 1 0 0\n", 2, "expected 3 non-negative integers"),
    ("SINGLE-SAMPLE\n1 0 1\n/d\n-\nf/0\n", 2, r"expected 1 non-negative integer \(samples\)"),
    ("CONDUIT_HDF5_INCLUSION\n1 0 1\n\n", 3, "base directory"),
    ("MULTI-SAMPLE_INCLUSION\n1 0 1\n/d\n", 4, "label file line"),
    (
        "CONDUIT_HDF5_INCLUSION\n1 0 1\n/d\npart-0.bzna one 0 3\n",
        4,
        "expected FILE then included and excluded",
    ),
    ("CONDUIT_HDF5_INCLUSION\n2 0 1\n/d\npart-0.bzna 2 0 3\n", 4, "says 2 included samples but lists 1"),
    ("CONDUIT_HDF5_EXCLUSION\n5 2 1\n/d\npart-0.bzna 5 2 3\n", 4, "says 2 excluded samples but lists 1"),
    ("MULTI-SAMPLE_INCLUSION_V2\n2 1\n/d\npart-0.bzna 2 3 3\n", 4, "sample 3 is listed twice"),
    ("MULTI-SAMPLE_INCLUSION_V2\n2 1\n/d\npart-0.bzna 2 5 ... 4\n", 4, "runs backwards"),
    ("MULTI-SAMPLE_INCLUSION_V2\n2 1\n/d\npart-0.bzna 2 ... 4\n", 4, "must stand between two indices"),
    (
        "MULTI-SAMPLE_INCLUSION_V2\n1 1\n/d\npart-0.bzna 1 3\npart-1.bzna 1 2\n",
        5,
        "announce 1 file line, but",
    ),
    ("MULTI-SAMPLE_INCLUSION_V2\n1 2\n/d\npart-0.bzna 1 3\n", 2, "announce 2 file lines, found 1"),
    (
        "MULTI-SAMPLE_INCLUSION_V2\n3 1\n/d\npart-0.bzna 2 3 4\n",
        2,
        "announce 3 included samples, the file lines",
    ),
    ("CONDUIT_HDF5_INCLUSION\n1 9 1\n/d\npart-0.bzna 1 6 3\n", 2, "announce 9 excluded samples"),
    ("SINGLE-SAMPLE\n1\n/d\n-\npart-0.bzna/1 part-0.bzna/2\n", 5, "one sample per line"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_malformed_lists_name_the_line(tmp_path, text, line, message):
    path = write(tmp_path, text, "bad.list")
    with pytest.raises(SampleListError, match=message) as e:
        SampleList.read(path)
    assert e.value.line == line and e.value.path == str(path)
    assert str(e.value).startswith(f"{path}, line {line}: ")


# Lists that parse but do not fit the data: the error names the line too.
MISFIT = [
    (
        "MULTI-SAMPLE_INCLUSION_V2\n1 1\n{base}\nnowhere.bzna 1 0\n",
        4,
        "nowhere.bzna .* is not one of the data files",
    ),
    (
        "MULTI-SAMPLE_INCLUSION_V2\n1 1\n{base}\npart-1.bzna 1 5\n",
        4,
        "sample index 5 out of range: the file holds 5",
    ),
    (
        "MULTI-SAMPLE_INCLUSION_V2\n1 1\n{base}\npart-1.bzna 1 s0_01.png\n",
        4,
        "'s0_01.png' is not a filename stored",
    ),
    ("CONDUIT_HDF5_EXCLUSION\n5 1 1\n{base}\npart-0.bzna 5 1 3\n", 4, r"5 included \+ 1 excluded .* holds 7"),
    # Inclusion lines give the file's size too: a list made for another file, or an earlier conversion.
    (
        "CONDUIT_HDF5_INCLUSION\n3 7 1\n{base}\npart-0.bzna 3 7 0 ... 2\n",
        4,
        r"part-0.bzna: 3 included \+ 7 excluded samples, but the data file .*part-0.bzna holds 7 samples: "
        "the list was made for another file",
    ),
    (
        "MULTI-SAMPLE_INCLUSION\n2 2 1\n{base}\n-\npart-1.bzna 2 2 s1_00.png 4\n",
        5,
        r"2 included \+ 2 excluded samples, but the data file .*part-1.bzna holds 5 samples",
    ),
    (
        "MULTI-SAMPLE_INCLUSION_V2\n2 2\n{base}\npart-0.bzna 1 3\n\npart-0.bzna 1 3\n",
        6,
        r"listed more than once \(lines \[4, 6\]\)",
    ),
    (  # one sample per line, blank lines counted: the lines named are the file's
        "SINGLE-SAMPLE\n3\n{base}\n-\npart-0.bzna/1\n\npart-0.bzna/2\npart-0.bzna/1\n",
        8,
        r"global sample 1 is listed more than once \(lines \[5, 8\]\)",
    ),
    # One file on two exclusion lines: each line's complement would keep the samples the other leaves out.
    (
        "CONDUIT_HDF5_EXCLUSION\n12 2 2\n{base}\npart-0.bzna 6 1 3\npart-0.bzna 6 1 4\n",
        5,
        r"part-0.bzna: .*part-0.bzna is on line 4 too: an exclusion list names each data file once",
    ),
    ("SINGLE-SAMPLE\n1\n{base}\n-\npart-9.bzna/3\n", 5, "no data file found"),
    # One sample excluded by index and by name: its complement would hold one more than the counts say.
    (
        "CONDUIT_HDF5_EXCLUSION\n5 2 1\n{base}\npart-0.bzna 5 2 1 s0_01.png\n",
        4,
        r"part-0.bzna: sample 1 excluded 2 times \(as 1, 's0_01.png'\)",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), MISFIT)
def test_lists_that_do_not_fit_the_data_name_the_line(flat_shards, tmp_path, text, line, message):
    path = write(tmp_path, text.format(base=os.path.dirname(flat_shards[0])), "misfit.list")
    d = ClassificationDataset(flat_shards)
    with pytest.raises(SampleListError, match=message) as e:
        d.as_dataset(batch_size=2, shape=8, sample_list=path)
    assert e.value.line == line and str(e.value).startswith(f"{path}, line {line}: ")


def test_a_list_by_names_reads_each_files_names_once(flat_shards):
    # SINGLE-SAMPLE with ids="names" read (and counted) all of a file's names once per listed sample:
    # 10 s for 2,500 samples, hours for ImageNet's validation split.
    starts = np.array([0, 10, 20])
    calls = []

    def filenames_of(k):
        calls.append(k)
        return [f"f{k}_{i}.png" for i in range(10)]

    paths = ["/d/a.bzna", "/d/b.bzna"]
    for kind in ("SINGLE-SAMPLE", "MULTI-SAMPLE_INCLUSION", "CONDUIT_HDF5_EXCLUSION"):
        calls.clear()
        lst = SampleList.from_indices(
            paths, starts, np.array([3, 12, 4, 19, 5]), kind=kind, ids="names", filenames_of=filenames_of
        )
        assert sorted(calls) == [0, 1], kind
    assert [e.ids for e in lst.entries] == [
        tuple(f"f0_{i}.png" for i in range(10) if i not in (3, 4, 5)),
        tuple(f"f1_{i}.png" for i in range(10) if i not in (2, 9)),
    ]
    calls.clear()
    single = SampleList.from_indices(
        paths, starts, np.arange(20), kind="SINGLE-SAMPLE", ids="names", filenames_of=filenames_of
    )
    assert calls == [0, 1] and single.entries[13].file == "b.bzna/f1_3.png"


def test_writer_refuses_names_that_would_not_read_back(tmp_path):
    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    path = tmp_path / "digits.bzna"
    with BznaWriter(path) as w:
        for name in ("0001", "a.png"):
            inp, thumb = encode_image(np.full((16, 16, 3), 90, np.uint8), preset="ultrafast")
            w.append(inp, thumb=thumb, target=0, filename=name)
    d = Dataset(path)
    with pytest.raises(ValueError, match="'0001' cannot serve as an id .* ids='indices'"):
        d.to_sample_list(ids="names")
    assert d.select([1]).to_sample_list(ids="names").entries[0].ids == ("a.png",)
    with pytest.raises(ValueError, match="list type"):
        d.to_sample_list("HDF5")


# ------------------------------------------------------------------------------------------ the CLI


def test_cli_writes_and_checks_a_list(flat_shards, tmp_path, capsys):
    out = tmp_path / "all.list"
    files = [str(p) for p in flat_shards]  # as the shell expands part-*.bzna (a pattern opens one dataset)
    assert cli(["samplelist", *files, "-o", str(out), "--type", "CONDUIT_HDF5_EXCLUSION"]) == 0
    assert open(out).read().splitlines()[:2] == ["CONDUIT_HDF5_EXCLUSION", "21 0 3"]
    assert cli(["samplelist", *files, "-o", str(out), "--split", "[:10]", "--ids", "names"]) == 0
    text = open(out).read().splitlines()
    assert text[1] == "10 2 2" and text[3].startswith("part-0.bzna 7 0 s0_00.png")
    assert text[4] == "part-1.bzna 3 2 s1_00.png s1_01.png s1_02.png"
    capsys.readouterr()
    assert cli(["samplelist", "--check", str(out)]) == 0
    assert (
        "CONDUIT_HDF5_INCLUSION, 2 file lines, 10 samples used of 12 in 2 data files"
        in capsys.readouterr().out
    )
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    (tmp_path / "bad.list").write_text("CONDUIT_HDF5_INCLUSION\n1 0 1\n/d\npart-0.bzna 2 0 1 2\n")
    assert cli(["samplelist", "--check", str(tmp_path / "bad.list")]) == 1
    assert "bad.list, line 2: the counts announce 1 included sample, " in capsys.readouterr().err


def test_lists_and_data_on_a_tensorflow_filesystem(flat_shards):
    tf = pytest.importorskip("tensorflow")
    urls = []
    for p in flat_shards[:2]:
        url = f"ram://lists/shards/{os.path.basename(p)}"
        tf.io.gfile.copy(p, url, overwrite=True)
        urls.append(url)
    with tf.io.gfile.GFile("ram://lists/train.list", "w") as f:
        f.write(
            "MULTI-SAMPLE_INCLUSION_V2\n3 2\nram://lists/shards\npart-1.bzna 1 4\npart-0.bzna 2 s0_06.png 0\n"
        )
    assert listed(ClassificationDataset(urls), "ram://lists/train.list") == [(1, 4), (0, 6), (0, 0)]
    with tf.io.gfile.GFile("ram://lists/single.list", "w") as f:
        f.write("SINGLE-SAMPLE\n1\nram://lists\n-\nshards/part-1.bzna/2\n")
    opened = Dataset.from_sample_list("ram://lists/single.list")
    assert opened.paths == [urls[1]] and opened.filenames == ["s1_02.png"]
    lst = ClassificationDataset(urls).select([8, 0]).to_sample_list()
    assert lst.base == "ram://lists/shards" and [e.file for e in lst.entries] == [
        "part-1.bzna",
        "part-0.bzna",
    ]


def test_a_list_is_never_written_over_a_data_file_nor_names_what_it_cannot_hold(
    flat_shards, tmp_path, capsys
):
    # `bzna-tf samplelist data/val.bzna -o data/val.bzna`, or `verify --exclusion-list data/*.bzna` (the
    # shell's last match as the list): the data file was replaced by a 64-byte list.
    import shutil

    data = shutil.copy(flat_shards[0], tmp_path / "val.bzna")
    before = (tmp_path / "val.bzna").read_bytes()
    lst = Dataset(data).to_sample_list()
    with pytest.raises(ValueError, match=r"val\.bzna is a \.bzna file, not a sample list: refusing to write"):
        lst.write(data)
    assert cli(["samplelist", str(data), "-o", str(data)]) == 1
    assert cli(["verify", str(data), "--no-decode", "--exclusion-list", str(data)]) == 1
    assert "not a sample list: refusing to write a list over it" in capsys.readouterr().err
    assert (tmp_path / "val.bzna").read_bytes() == before
    (tmp_path / "notes.txt").write_text("my notes\n")
    with pytest.raises(ValueError, match="notes.txt is a text file, not a sample list"):
        lst.write(tmp_path / "notes.txt")
    # verify refuses before it reads a picture (it refused after the run: hours on ImageNet).
    import bzna_tf.verify

    def not_run(*args, **kwargs):
        raise AssertionError("verify ran")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(bzna_tf.verify, "verify", not_run)
        assert cli(["verify", str(data), "--exclusion-list", str(data)]) == 1
    assert "val.bzna is a .bzna file, not a sample list" in capsys.readouterr().err
    # Over a list (as the reader takes one: its type in lower case, words after it, CRLF line ends), or
    # an empty file: written.
    for text in ("single-sample\n1\n/\n-\n", "SINGLE-SAMPLE  # hand-made\n", "SINGLE-SAMPLE\r\n1\r\n"):
        (tmp_path / "hand.list").write_text(text, newline="")
        lst.write(tmp_path / "hand.list")
    lst.write(tmp_path / "a.list")
    lst.write(tmp_path / "a.list")
    (tmp_path / "empty.list").write_bytes(b"")
    lst.write(tmp_path / "empty.list")
    assert (tmp_path / "empty.list").read_text() == (tmp_path / "a.list").read_text() == lst.to_text()
    # A file name with a space: no reader could split the line back; refused when written.
    spaced = shutil.copy(flat_shards[0], tmp_path / "a b.bzna")
    with pytest.raises(ValueError, match=r"cannot name 'a b.bzna' .*list lines are split at spaces"):
        Dataset(spaced).to_sample_list().write(tmp_path / "spaced.list")
    assert not (tmp_path / "spaced.list").exists()


def test_check_refuses_the_flags_of_a_list_being_written(flat_shards, tmp_path, capsys):
    # `samplelist --check LIST --split '[:50%]'` reported the whole list's count (the split ignored), and
    # `--check LIST -o new.list` wrote nothing, both with exit status 0.
    listed = Dataset(flat_shards).to_sample_list().write(tmp_path / "all.list")
    for extra in (["--split", "[:50%]"], ["-o", str(tmp_path / "new.list")], ["--labelled-only"]):
        assert cli(["samplelist", "--check", listed, *extra]) == 1
        assert f"{extra[0]} shape a list being written" in capsys.readouterr().err
    assert not (tmp_path / "new.list").exists()
    assert cli(["samplelist", "--check", listed]) == 0


def test_dataset_filename_reads_one_name(flat_shards, monkeypatch):
    # ds.filenames[i] read every name of every file (seconds and 270 MB on ImageNet) for one name.
    ds = Dataset(flat_shards).select([12, 0, 5])
    want = ds.filenames
    monkeypatch.setattr(type(ds._index), "filenames", lambda self: pytest.fail("read every name"))
    assert [ds.filename(i) for i in range(3)] == want and ds.filename(-3) == want[0]
    for bad in (3, -4, 1.0, True):
        with pytest.raises(IndexError, match=r"Expected a position in \[-3, 3\)"):
            ds.filename(bad)
