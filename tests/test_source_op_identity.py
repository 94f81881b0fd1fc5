"""A file converted again (or replaced) after its index was read is refused by the source ops, not read
through the old index: the identity the Python index came from (BznaFile.identity) travels with the
pipeline and the ops compare the file they open with it."""

import os
import re
import shutil

import numpy as np
import pytest

from bzna_tf import BznaFile, BznaWriter, ClassificationDataset, Dataset
from bzna_tf.format.errors import BznaFormatError

tf = pytest.importorskip("tensorflow")

N = 6  # samples per file; targets i % 3


@pytest.fixture(scope="module")
def encoded():
    """N flat-coloured pictures of different sizes, encoded once."""
    from bzna_tf.convert import encode_image

    out = []
    for i in range(N):
        img = np.broadcast_to(np.array([30 * i + 20, 200 - 25 * i, 90], np.uint8), (24 + 8 * i, 40, 3))
        out.append(encode_image(img.copy(), preset="ultrafast"))
    return out


def write(path, encoded, order, *, checksums=True):
    """The samples in ``order`` (another order: what converting again with another seed gives, same size)."""
    with BznaWriter(path, checksums=checksums) as w:
        for i in order:
            inp, thumb = encoded[i]
            w.append(inp, thumb=thumb, target=i % 3, filename=f"img_{i}.png")


def convert_again(path, encoded, order, *, checksums=True, mtime_ns=None):
    """Replaces ``path`` as the converter does (a new file renamed over it), optionally with a given
    modification time; the size stays the same."""
    size = os.path.getsize(path)
    tmp = f"{path}.part"
    write(tmp, encoded, order, checksums=checksums)
    if mtime_ns is not None:
        os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, path)
    assert os.path.getsize(path) == size


def names(pipe):
    return [n.decode() for el in pipe for n in el[-1].numpy()]


CHANGED = r": the file changed since the dataset was opened \(converted again or replaced: "
AGAIN = r"\), so the dataset's index would name the wrong pictures: build the dataset again"


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "no-checksums"])
def test_a_running_pipeline_refuses_a_file_converted_again_between_epochs(encoded, tmp_path, checksums):
    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N), checksums=checksums)
    train = Dataset(path, split="[:50%]")
    pipe = train.as_dataset(batch_size=2, shape=8, training=False, with_filenames=True)
    assert names(pipe) == ["img_0.png", "img_1.png", "img_2.png"]
    old = os.stat(path).st_mtime_ns
    if checksums:
        # Same size and, as on a filesystem of whole-second times, the same modification time: the
        # index checksums still tell the conversions apart.
        convert_again(path, encoded, [3, 4, 5, 0, 1, 2], mtime_ns=old)
        why = r"index checksums \(moov, targets, names\) 0x[0-9a-f]{8}, .* then, 0x[0-9a-f]{8}, .* now"
    else:
        convert_again(path, encoded, [3, 4, 5, 0, 1, 2], checksums=False, mtime_ns=old + 10**9)
        why = r"modified at \d+\.\d{9} then, \d+\.\d{9} now"
    with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED + why + AGAIN):
        names(pipe)  # epoch 1 would read images of the old other half


def test_a_selection_made_before_the_file_was_converted_again_is_refused(encoded, tmp_path):
    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    ds = ClassificationDataset(path)
    ones = ds.select(ds.targets == 1)
    early = ones.as_dataset(batch_size=2, shape=8, training=False)
    convert_again(path, encoded, [5, 4, 3, 2, 1, 0])
    late = ones.as_dataset(batch_size=2, shape=8, training=False)
    # Pipelines made before and since are refused by the op, not read as classes 2, 0, 1: the identity is
    # that of the file the index was read from.
    for pipe in (early, late):
        with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED):
            list(pipe)
    # The dataset's own reads refuse it too; one opened again reads the new file.
    with pytest.raises(BznaFormatError, match="the file changed since it was opened"):
        ones.filenames  # noqa: B018
    again = ClassificationDataset(path)
    ones = again.select(again.targets == 1)
    assert [int(t) for _, ts in ones.as_dataset(batch_size=2, shape=8) for t in ts] == [1, 1]


def test_file_identity(encoded, tmp_path):
    with_sums, without = tmp_path / "a.bzna", tmp_path / "b.bzna"
    write(with_sums, encoded, range(N))
    write(without, encoded, range(N), checksums=False)
    with BznaFile(with_sums) as f:
        ident = f.identity
        table = f.checksums
        sums = (table.moov, table.targets, table.names)
        assert ident == (os.path.getsize(with_sums), os.stat(with_sums).st_mtime_ns, *sums)
        convert_again(with_sums, encoded, [1, 0, 2, 3, 4, 5])
        assert f.identity == ident  # the file the index was read from, known from opening
    with BznaFile(without, keep_open=False) as f:
        assert f.identity == (os.path.getsize(without), os.stat(without).st_mtime_ns, -1, -1, -1)
    with open(with_sums, "rb") as fo, BznaFile(fo) as f:
        assert f.identity is None  # a file object: no path for the ops to open


def test_bzna_dataset_compares_identities_and_each_iterator_its_files(encoded, tmp_path):
    from bzna_tf.ops import BznaDataset

    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    with BznaFile(path) as f:
        ident = f.identity
    ds = BznaDataset(path, [0, 1], with_filenames=True, identities=[ident])
    assert [el["filename"].numpy() for el in ds] == [b"img_0.png", b"img_1.png"]
    bigger = ident._replace(size=ident.size + 1)
    grew = re.escape(path) + CHANGED + rf"{ident.size + 1} bytes then, {ident.size} now"
    with pytest.raises(tf.errors.FailedPreconditionError, match=grew):
        BznaDataset(path, identities=[bigger])
    with pytest.raises(ValueError, match="one identity per file"):
        BznaDataset(path, identities=[ident, ident])
    with pytest.raises(ValueError, match="5 integers"):
        BznaDataset(path, identities=[ident[:2]])
    # The dataset holds the file it opened; an iterator started after it was replaced refuses it.
    convert_again(path, encoded, [1, 0, 2, 3, 4, 5])
    with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED + "another file"):
        list(ds)


def test_a_file_touched_or_copied_back_with_its_checksums_is_the_same_conversion(encoded, tmp_path):
    # With a checksum table, a file is known by its size and index checksums: a new time (touch, as
    # scratch-purge dodgers do) or a copy of it put back under its name reads on. Without one, the
    # time is all there is, and a touched file is refused.
    from bzna_tf.ops import BznaDataset

    for checksums in (True, False):
        path = str(tmp_path / f"t{int(checksums)}.bzna")
        write(path, encoded, range(N), checksums=checksums)
        ds = BznaDataset(path, [0, 1], with_filenames=True)
        pipe = Dataset(path).as_dataset(batch_size=2, shape=8, with_filenames=True)
        assert len(list(ds)) == 2 and len(names(pipe)) == N
        later = os.stat(path).st_mtime_ns + 5_000_000_000
        os.utime(path, ns=(later, later))
        if not checksums:
            touched = re.escape(path) + CHANGED + "modified"
            with pytest.raises(tf.errors.FailedPreconditionError, match=touched):
                list(ds)
            continue
        assert [el["filename"].numpy() for el in ds] == [b"img_0.png", b"img_1.png"]
        assert sorted(names(pipe)) == sorted(f"img_{i}.png" for i in range(N))
        copy = f"{path}.copy"
        with open(path, "rb") as f, open(copy, "wb") as g:
            g.write(f.read())
        os.replace(copy, path)  # another inode, the same conversion
        assert len(list(ds)) == 2 and len(names(pipe)) == N
        convert_again(path, encoded, [1, 0, 2, 3, 4, 5], mtime_ns=later)  # the same size and time
        with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED):
            list(ds)


def test_read_samples_checks_identities(encoded, tmp_path):
    from bzna_tf.ops import read_samples
    from bzna_tf.ops._load import load_library

    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N), checksums=False)
    with BznaFile(path) as f:
        ident = f.identity
    out = read_samples([path], tf.constant([2], tf.int64), with_filenames=True, identities=[ident])
    assert out["filename"].numpy().tolist() == [b"img_2.png"]
    stale = ident._replace(mtime_ns=ident.mtime_ns - 1)
    with pytest.raises(tf.errors.FailedPreconditionError, match=CHANGED + "modified at"):
        read_samples([path], tf.constant([2], tf.int64), identities=[stale], on_error="skip")
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected 5 identity values per file"):
        load_library().bzna_read_samples([path], tf.constant([2], tf.int64), identities=[1, 2, 3])


def test_read_samples_reads_the_file_at_its_path_when_called(encoded, tmp_path):
    # Eager TensorFlow keeps the op's kernel for every call with the same attributes, and the kernel
    # kept its files open: after the file was converted again (renamed over it), a later call read the
    # old file's pictures and names, as if it were still there.
    from bzna_tf.ops import read_samples

    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    first = read_samples([path], tf.constant([0, 1], tf.int64), with_filenames=True)
    assert first["filename"].numpy().tolist() == [b"img_0.png", b"img_1.png"]
    convert_again(path, encoded, [1, 0, *range(2, N)])
    again = read_samples([path], tf.constant([0, 1], tf.int64), with_filenames=True)
    assert again["filename"].numpy().tolist() == [b"img_1.png", b"img_0.png"]
    assert again["target"].numpy().tolist() == [1, 0]


def test_a_new_dataset_of_a_file_rewritten_in_place_reads_its_new_index(encoded, tmp_path):
    # The ops share the index of a file among the datasets that read it, while its size, modification
    # time and inode stay the same. A file rewritten in place under the same modification time (or
    # replaced remotely within its filesystem's time resolution) keeps all three: the index checksums
    # of a dataset opened since tell the ops that the index they hold is not that file's.
    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    old = Dataset(path).as_dataset(batch_size=2, shape=8, training=False, with_filenames=True)
    running = iter(old)
    next(running)  # holds the first index
    rewrite_keeping_size_and_time(path, encoded, tmp_path)
    new = Dataset(path)
    assert new.filenames[0] == "img_5.png"
    pipe = new.as_dataset(batch_size=2, shape=8, training=False, with_filenames=True)
    assert names(pipe) == [f"img_{i}.png" for i in [5, 4, 3, 2, 1, 0]]
    del running


def rewrite_keeping_size_and_time(path, encoded, tmp_path):
    """Rewrites ``path`` in place with the same pictures in another order (img_5 first), keeping its size,
    modification time and inode."""
    st = os.stat(path)
    write(tmp_path / "b.bzna", encoded, [5, 4, 3, 2, 1, 0])
    with open(path, "r+b") as f:
        f.write((tmp_path / "b.bzna").read_bytes())
        f.truncate()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_ino == st.st_ino


def copy_over(src, path):
    """What cp or shutil.copyfile of another file over ``path`` does: the same inode, truncated and written
    again."""
    ino = os.stat(path).st_ino
    shutil.copyfile(src, path)
    assert os.stat(path).st_ino == ino


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("change", ["copied over", "truncated"])
def test_a_file_changed_in_place_under_a_running_epoch_stops_it(encoded, tmp_path, change, on_error):
    # The rest of the epoch would read the new bytes through the old index: the file changed, which is
    # never a run of bad samples to skip.
    path, new = str(tmp_path / "a.bzna"), str(tmp_path / "new.bzna")
    order = [i % N for i in range(4 * N)]
    write(path, encoded, order)
    os.utime(path, ns=(10**18, 10**18))  # a time the copy's cannot be
    write(new, encoded, order[::-1])  # another conversion of the same size
    size = os.path.getsize(path)
    assert os.path.getsize(new) == size
    pipe = Dataset(path).as_dataset(
        batch_size=2, shape=8, training=False, with_filenames=True, prefetch=1, num_parallel_calls=1,
        on_error=on_error,
    )  # fmt: skip
    running = iter(pipe)
    read = [n.decode() for n in next(running)[-1].numpy()]
    if change == "copied over":
        copy_over(new, path)
        # A read racing the copy may find it part-written.
        why = rf"(modified at 1000000000\.000000000 then, \d+\.\d{{9}} now|{size} bytes then, \d+ now)"
    else:
        os.truncate(path, size // 2)
        why = rf"{size} bytes then, {size // 2} now"
    # The read-ahead holds a few batches read before the change; the later ones are read after it.
    with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED + why + AGAIN):
        for el in running:
            read += [n.decode() for n in el[-1].numpy()]
    assert read[:2] == ["img_0.png", "img_1.png"] and len(read) < len(order)
    if on_error == "skip":
        assert pipe.bzna_skipped.count == 0


def test_an_iterator_refuses_a_file_rewritten_in_place_with_its_size_and_time(encoded, tmp_path):
    # Size, modification time and inode all kept: the failed read's check finds other index checksums.
    from bzna_tf.ops import BznaDataset

    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    ds = BznaDataset(path, with_filenames=True)
    running = iter(ds)
    assert next(running)["filename"].numpy() == b"img_0.png"
    rewrite_keeping_size_and_time(path, encoded, tmp_path)
    why = r"index checksums \(moov, targets, names\) 0x[0-9a-f]{8}, .* then, 0x[0-9a-f]{8}, .* now"
    with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED + why + AGAIN):
        list(running)


def test_read_samples_refuses_samples_of_a_file_truncated_since_it_opened_it(encoded, tmp_path):
    from bzna_tf.ops import read_samples

    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N))
    with BznaFile(path) as f:
        ident = f.identity
    first = read_samples([path], tf.constant([0], tf.int64), identities=[ident], on_error="skip")
    assert first["errors"].numpy().tolist() == [b""]
    size = os.path.getsize(path)
    os.truncate(path, size // 2)
    grew = re.escape(path) + CHANGED + rf"{size} bytes then, {size // 2} now" + AGAIN
    with pytest.raises(tf.errors.FailedPreconditionError, match=grew):
        read_samples([path], tf.constant([N - 1], tf.int64), identities=[ident], on_error="skip")


@pytest.mark.parametrize("change", ["truncated", "zeroed"])
@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "no-checksums"])
def test_a_file_damaged_between_epochs_is_refused_as_changed(encoded, tmp_path, checksums, change):
    # Its index no longer reads: what differs from the file the dataset was opened on says more than the box
    # that does not parse.
    path = str(tmp_path / "a.bzna")
    write(path, encoded, range(N), checksums=checksums)
    os.utime(path, ns=(10**18, 10**18))  # a time the change's cannot be
    pipe = Dataset(path).as_dataset(batch_size=2, shape=8, training=False, with_filenames=True)
    assert len(names(pipe)) == N
    size = os.path.getsize(path)
    if change == "truncated":
        os.truncate(path, size // 2)
        why = rf"{size} bytes then, {size // 2} now"
    else:
        with open(path, "r+b") as f:
            f.write(bytes(size))
        why = r"modified at 1000000000\.000000000 then, \d+\.\d{9} now"
    with pytest.raises(tf.errors.FailedPreconditionError, match=re.escape(path) + CHANGED + why + AGAIN):
        names(pipe)  # not a DataLossError about a box of the file
