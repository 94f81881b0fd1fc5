"""Malformed files raise BznaFormatError (naming file, offset, box, sample), never anything else.

The property tests change a small file in one kind of place at a time, and each change has one
outcome, known from the format: the reader refuses it (naming the file and, where it knows them,
the sample, the box and the offset), or it reads the file and gives exactly what the changed bytes
now hold, ``check_index`` (``bzna-tf verify``) reporting the parts whose checksums no longer match.

- Any change inside a per-image mp4 is refused naming its sample: the ``bzna_input`` CRC-32C covers
  every byte of it. A CRC-32C detects every error within 32 consecutive bits, so each changed
  picture gets one burst of at most 4 bytes; a changed size or offset moves what it covers.
- A changed stored picture checksum is refused naming its sample.
- A box size smaller than its header, or running past its parent or the file, is refused for every
  box the reader walks; ``size 0`` ("to the end") on the last box of its parent reads as before.
- A count that does not fit its box, or disagrees with the other tables, is refused.
- Targets, names and their outer sample tables are read as they now are (no picture checksum covers
  them; ``check_index`` reports the change), and so are bytes the reader does not use (``mvhd``, the
  ``dref`` in ``dinf``, a ``stsd`` entry count, the index checksums, an unknown table version).

Changes with no single outcome are not generated: an outer box size inside its parent re-frames the
bytes after it (a ``trak`` of size 0 takes the tracks after it in as children), and what that gives
depends on those bytes; the ``moov`` checksum of ``check_index`` reports it.
"""

import dataclasses
import io
import struct

import pytest
from _pictures import _pic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bzna_tf.format import BznaFile, BznaFormatError, BznaWriter
from bzna_tf.format.boxes import find, parse_boxes
from bzna_tf.format.sample import FNAME, INPUT, TARGET, THUMB

NAME = "fuzzed.bzna"
CONTAINERS = {"moov", "trak", "mdia", "minf", "dinf", "stbl"}
PARTS = ("moov", "targets", "names")  # what check_index reports, in its order


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """A small but complete .bzna (fake slice payloads: this layer never decodes)."""
    path = tmp_path_factory.mktemp("bad") / "small.bzna"
    with BznaWriter(path) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
        w.append(
            _pic(9, (900, 600), (1024, 1024)),
            thumb=_pic(4, (512, 341), (512, 512)),
            target=1,
            filename="b.jpg",
        )
        w.append(_pic(7, (20, 30), (512, 512)), filename="c.jpg")
    return path.read_bytes()


@dataclasses.dataclass(frozen=True)
class Contents:
    """What a reader gets from a file."""

    targets: tuple
    names: tuple
    samples: tuple  # per sample: (input Annex-B, thumbnail Annex-B, outer thumbnail (offset, size))


def read_everything(data: bytes) -> Contents:
    """Touch every part of a file the way the loader and the CLI do, and return what it holds."""
    with BznaFile(io.BytesIO(data), name=NAME) as f:
        targets, names = tuple(f.targets.tolist()), tuple(f.filenames())
        touched = [(t.offsets, t.sizes, t.mime) for t in f.tracks.values()]
        samples = []
        for i in range(len(f)):
            assert (f.target(i), f.filename(i)) == (targets[i], names[i])
            thumb = f.thumb_location(i) if THUMB in f.tracks else None
            s = f.sample(i)
            samples.append((s.input.annexb(), s.thumb.annexb(), thumb))
        assert len(touched) == len(f.tracks)
        return Contents(targets, names, tuple(samples))


def refused(data: bytes, *, sample=None, reason="", box=None, offset=None) -> BznaFormatError:
    """Reading ``data`` raises BznaFormatError naming the file and ``sample`` (None: no sample)."""
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    err, msg = e.value, str(e.value)
    assert err.path == NAME and msg.startswith(NAME), msg
    assert err.sample == sample and reason in err.reason, msg
    assert box is None or err.box == box, msg
    assert offset is None or err.offset == offset, msg
    return err


def reads(data: bytes, contents: Contents, changed=()) -> None:
    """``data`` reads as ``contents`` (its targets and names refused, the first of them in ``changed``:
    they differ from their checksums); check_index reports exactly the parts in ``changed``."""
    part = next((p for p in ("targets", "names") if p in changed), None)
    if part is None:
        assert read_everything(data) == contents
    else:
        track = TARGET if part == "targets" else FNAME
        refused(data, reason=f"checksum mismatch of the {part}", box=f"trak[{track}]")
        with BznaFile(io.BytesIO(unchecked(data)), name=NAME) as f:  # read unchecked, as they now are
            assert (tuple(f.targets.tolist()), tuple(f.filenames())) == (contents.targets, contents.names)
    with BznaFile(io.BytesIO(data), name=NAME) as f:
        found = [p.split(" (stored")[0] for p in f.check_index()]
    assert found == [f"{NAME}: checksum mismatch of the {p}" for p in PARTS if p in changed]


def unchecked(data: bytes) -> bytes:
    """``data`` with its checksum table in another version, which readers ignore: nothing is checked."""
    with BznaFile(io.BytesIO(data), name=NAME) as f:
        version = f.checksums.offset + 8 + 16  # after the box's size, type and usertype
    return data[:version] + b"\x02" + data[version + 1 :]


class Layout:
    """Where things are in the small file, and what it holds."""

    def __init__(self, data: bytes):
        self.data = data
        with BznaFile(io.BytesIO(data), name=NAME) as f:
            # hdlr name -> (offsets, sizes) of its outer samples, and {type: box} of its outer sample table
            self.tracks = {n: (t.offsets.tolist(), t.sizes.tolist()) for n, t in f.tracks.items()}
            self.stbl = {}
            for n, t in f.tracks.items():
                minf = find(find(t.box.children(), "mdia").children(), "minf")
                self.stbl[n] = {b.type: b for b in find(minf.children(), "stbl").children()}
            self.pictures = [f.sample_location(i) for i in range(len(f))]  # each per-image mp4
            self.separate = [f.sample(i).has_separate_thumb for i in range(len(f))]
            self.mvhd = find(f.moov.children(), "mvhd")
            self.table = f.checksums.offset + 8 + 16  # the table's version byte, after size, type, usertype
        # version/flags, algorithm, sample count, 3 index checksums, track count, then the track names
        self.columns = self.table + 25
        for _ in range(data[self.table + 24]):
            self.columns += 1 + data[self.columns]
        assert len(data) - self.columns == 4 * 2 * len(self.pictures)  # bzna_input and bzna_thumb
        self.contents = read_everything(data)

    def __repr__(self):  # hypothesis prints the arguments of a failing example
        return "Layout(small_file)"


@pytest.fixture(scope="module")
def layout(small_file):
    return Layout(small_file)


class Quiet(dict):
    """A fixture's table, which hypothesis prints as one word with a failing example."""

    def __repr__(self):
        return f"<{len(self)} entries>"


def test_small_file_is_valid(small_file, layout):
    reads(small_file, layout.contents)
    c = layout.contents
    assert c.targets == (3, 1, -1) and c.names == ("a.jpg", "b.jpg", "c.jpg")
    assert layout.separate == [False, True, False]


FUZZ = settings(
    max_examples=300, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@FUZZ
@given(st.data())
def test_truncations(small_file, data):
    n = data.draw(st.integers(0, len(small_file) - 1))
    refused(small_file[:n])


def _xor(data: bytes, changes) -> bytes:
    b = bytearray(data)
    for pos, mask in changes:
        b[pos] ^= mask
    return bytes(b)


@FUZZ
@given(st.data())
def test_flipped_bytes_in_pictures_are_refused_naming_the_first_changed_sample(layout, data):
    n = len(layout.pictures)
    changed = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    changes = []
    for i in changed:  # one burst of 1 to 4 bytes per picture, its first byte changed
        off, size = layout.pictures[i]
        length = data.draw(st.integers(1, 4))
        at = data.draw(st.integers(off, off + size - length))
        masks = [data.draw(st.integers(1, 255))] + data.draw(
            st.lists(st.integers(0, 255), min_size=length - 1, max_size=length - 1)
        )
        changes += [(at + k, m) for k, m in enumerate(masks)]
    refused(_xor(layout.data, changes), sample=min(changed))


@FUZZ
@given(st.data())
def test_flipped_stored_checksums_are_refused_naming_the_first_changed_sample(layout, data):
    n = len(layout.pictures)
    changes = data.draw(
        st.lists(
            st.tuples(st.integers(layout.columns, len(layout.data) - 1), st.integers(1, 255)),
            min_size=1,
            max_size=8,
            unique_by=lambda c: c[0],
        )
    )
    # The columns: n checksums of bzna_input pictures, then n of bzna_thumb.
    first = min((pos - layout.columns) // 4 % n for pos, _ in changes)
    refused(_xor(layout.data, changes), sample=first, reason="checksum mismatch")


def _region(layout, where):
    """(start, end) of the bytes a test changes, and the values it writes there."""
    if where == "targets":
        (start, _), _ = layout.tracks[TARGET]
        return start, start + 8 * len(layout.tracks[TARGET][0]), st.integers(0, 255)
    if where == "names":
        offs, sizes = layout.tracks[FNAME]
        return offs[0], offs[-1] + sizes[-1], st.integers(0x20, 0x7E)  # ASCII: always valid UTF-8
    if where == "index checksums":
        return layout.table + 12, layout.table + 24, st.integers(0, 255)
    if where == "mvhd":
        return layout.mvhd.payload_offset, layout.mvhd.offset + layout.mvhd.size, st.integers(0, 255)
    assert where == "table version"
    return layout.table, layout.table + 1, st.integers(2, 256).map(lambda v: v % 256)  # not 1


@pytest.mark.parametrize("where", ["targets", "names", "index checksums", "mvhd", "table version"])
@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_flipped_bytes_outside_pictures_read_as_they_now_are(layout, where, data):
    start, end, values = _region(layout, where)
    b = bytearray(layout.data)
    for pos, value in data.draw(
        st.lists(st.tuples(st.integers(start, end - 1), values), min_size=1, max_size=8)
    ):
        b[pos] = value
    new, old, c = bytes(b), layout.data, layout.contents
    if where == "targets":
        labelled = len(layout.tracks[TARGET][0])  # then the unlabelled tail: -1
        targets = struct.unpack_from(f"<{labelled}q", new, start) + c.targets[labelled:]
        reads(new, dataclasses.replace(c, targets=targets), {"targets"} if new != old else set())
    elif where == "names":
        offs, sizes = layout.tracks[FNAME]
        raw = [new[o : o + s] for o, s in zip(offs, sizes, strict=True)]
        names = tuple((r[:-1] if r.endswith(b"\0") else r).decode("ascii") for r in raw)
        reads(new, dataclasses.replace(c, names=names), {"names"} if new != old else set())
    elif where == "index checksums":  # the moov, targets and names checksums, in that order
        fields = [slice(start + 4 * k, start + 4 * k + 4) for k in range(len(PARTS))]
        reads(new, c, {p for p, f in zip(PARTS, fields, strict=True) if new[f] != old[f]})
    elif where == "mvhd":
        reads(new, c, {"moov"} if new != old else set())
    else:  # a table of another version is ignored: nothing is checked
        with BznaFile(io.BytesIO(new), name=NAME) as f:
            assert not f.checksums.supported and f"version {new[start]}," in f.checksums.reason
        reads(new, c)


def _overwrite_u32(data: bytes, pos: int, value: int) -> bytes:
    b = bytearray(data)
    b[pos : pos + 4] = struct.pack(">I", value)
    return bytes(b)


@dataclasses.dataclass(frozen=True)
class BoxAt:
    offset: int
    size: int
    path: str  # as the reader names it: moov/trak/mdia
    left: int  # bytes from the box to the end of its parent (the file, or its per-image mp4)
    last: bool  # the last box of its parent
    sample: int | None  # the per-image mp4 that holds it, or None in the outer index


def _walk(data, start, end, parent="", sample=None):
    kids = parse_boxes(data, start, end)
    for j, b in enumerate(kids):
        path = f"{parent}/{b.type}" if parent else b.type
        yield BoxAt(b.offset, b.size, path, end - b.offset, j == len(kids) - 1, sample)
        if b.type in CONTAINERS:
            yield from _walk(data, b.payload_offset, b.offset + b.size, path, sample)


def box_offsets(data):
    """(offset, size) of every box of the outer index (tests/test_source_op_bad_input.py changes them too)."""
    return [(b.offset, b.size) for b in _walk(data, 0, len(data))]


@pytest.fixture(scope="module")
def small_boxes(layout):
    """The boxes of the outer index, and those of the per-image mp4s."""
    nested = []
    for i, (off, size) in enumerate(layout.pictures):
        nested += _walk(layout.data, off, off + size, sample=i)
    boxes = Quiet(outer=list(_walk(layout.data, 0, len(layout.data))), nested=nested)
    assert any(b.path == "moov/trak/mdia/minf/dinf/dref" for b in boxes["outer"])
    assert {b.sample for b in nested} == {0, 1, 2}
    return boxes


def a_box(boxes):
    return st.sampled_from(boxes["outer"]) | st.sampled_from(boxes["nested"])


def check_box_size(layout, b: BoxAt, new: int):
    """The one outcome of writing ``new`` over the 32-bit size of box ``b``."""
    data = _overwrite_u32(layout.data, b.offset, new)
    if b.sample is not None:
        return refused(data, sample=b.sample)
    in_moov = {"moov"} if b.path.startswith("moov/") else set()
    if "/dinf/" in b.path:  # the reader never reads what dinf holds
        return reads(data, layout.contents, in_moov)
    if 2 <= new < 8:
        reason = f"box size {new} is smaller than its 8-byte header"
        return refused(data, reason=reason, box=b.path, offset=b.offset)
    if new > b.left:
        reason = f"box size {new} runs past the end of"
        return refused(data, reason=reason, box=b.path, offset=b.offset)
    assert new == 0 and b.last, "not generated: no single outcome"
    return reads(data, layout.contents, in_moov)


@FUZZ
@given(st.data())
def test_bogus_box_sizes(layout, small_boxes, data):
    b = data.draw(a_box(small_boxes))
    sizes = [
        st.integers(2, 7),
        st.integers(b.left + 1, (1 << 32) - 1),
        st.sampled_from([0x7FFFFFFF, 0xFFFFFFFF]),
    ]
    if b.last:
        sizes.append(st.just(0))
    if b.sample is not None or "/dinf/" in b.path:
        sizes.append(st.integers(0, (1 << 32) - 1).filter(lambda v: v != b.size))
    check_box_size(layout, b, data.draw(st.one_of(sizes)))


@FUZZ
@given(st.data())
def test_child_larger_than_parent(layout, small_boxes, data):
    b = data.draw(a_box(small_boxes))
    check_box_size(layout, b, b.left + data.draw(st.integers(1, 1 << 16)))


@dataclasses.dataclass(frozen=True)
class Field:
    what: str
    pos: int
    track: str | None = None
    sample: int | None = None


@pytest.fixture(scope="module")
def index_fields(layout):
    """The 32-bit fields of the outer index and the checksum table, by kind."""
    m = layout.mvhd
    out = {"mvhd": [Field("mvhd", p) for p in range(m.payload_offset, m.offset + m.size - 3)]}
    out["table count"] = [Field("table count", layout.table + 8)]
    for name, boxes in layout.stbl.items():
        stsd, stsz, stsc, stco = (boxes[k] for k in ("stsd", "stsz", "stsc", "stco"))
        for what, pos in [
            ("stsd count", stsd.payload_offset + 4),
            ("stsz count", stsz.payload_offset + 8),
            ("stsc count", stsc.payload_offset + 4),
            ("stco count", stco.payload_offset + 4),
        ]:
            out.setdefault(what, []).append(Field(what, pos, name))
        for i in range(len(layout.tracks[name][0])):
            out.setdefault(f"{name} size", []).append(
                Field("size", stsz.payload_offset + 12 + 4 * i, name, i)
            )
            out.setdefault(f"{name} offset", []).append(
                Field("offset", stco.payload_offset + 8 + 4 * i, name, i)
            )
    return Quiet(out)


def check_field(layout, f: Field, value: int):
    """The one outcome of writing ``value`` over field ``f``."""
    data, c = _overwrite_u32(layout.data, f.pos, value), layout.contents
    if f.what in ("mvhd", "stsd count") or (f.what == "stsc count" and value == 0):
        return reads(data, c, {"moov"})  # not read; a missing stsc is one sample per chunk
    if f.what == "stsc count":
        return refused(data, reason=f"stsc entries: {3 * value} entries of 4 bytes")
    if f.what == "table count":
        return refused(data, reason=f"checksum table: {value} samples, the file has {len(c.targets)}")
    n = len(layout.tracks[f.track][0])
    if f.what == "stsz count":
        reason = (
            f"stsz entry_size table: {value} entries"
            if value > n
            else f"{n} chunk offsets for {value} samples"
        )
        return refused(data, reason=reason)
    if f.what == "stco count":
        reason = f"chunk offsets: {value} entries" if value > n else f"{value} chunk offsets for {n} samples"
        return refused(data, reason=reason)
    # a sample's size or offset in the outer index
    i = f.sample
    offs, sizes = (list(v) for v in layout.tracks[f.track])
    (offs if f.what == "offset" else sizes)[i] = value
    off, size = offs[i], sizes[i]
    if off + size > len(data):
        return refused(data, sample=i, reason="past the end of the data")
    if f.track == TARGET and size != 8:
        return refused(data, sample=i, reason=f"target sample is {size} bytes, expected 8")
    if f.track == INPUT:  # its checksum covers other bytes now
        return refused(data, sample=i)
    if f.track == TARGET:
        targets = list(c.targets)
        targets[i] = struct.unpack_from("<q", data, off)[0]
        changed = {"moov"} | ({"targets"} if tuple(targets) != c.targets else set())
        return reads(data, dataclasses.replace(c, targets=tuple(targets)), changed)
    if f.track == FNAME:
        raw = [data[o : o + s] for o, s in zip(offs, sizes, strict=True)]
        try:
            names = tuple((r[:-1] if r.endswith(b"\0") else r).decode("utf-8") for r in raw)
        except UnicodeDecodeError:  # the names changed: their checksum first, then their bytes
            refused(data, reason="checksum mismatch of the names", box=f"trak[{FNAME}]")
            return refused(unchecked(data), sample=i, reason="filename is not valid UTF-8")
        before = b"".join(layout.data[o : o + s] for o, s in zip(*layout.tracks[FNAME], strict=True))
        changed = {"moov"} | ({"names"} if b"".join(raw) != before else set())
        return reads(data, dataclasses.replace(c, names=names), changed)
    assert f.track == THUMB
    samples = list(c.samples)
    samples[i] = (*samples[i][:2], (off, size))
    moved = dataclasses.replace(c, samples=tuple(samples))
    if f.what == "size":  # only the outer index holds it: nothing reads it back
        return reads(data, moved, {"moov"})
    start, length = layout.pictures[i]
    t = off - start
    if not 0 <= t < length:
        return refused(data, sample=i, reason="outside it, so its checksum cannot be checked")
    boxes = parse_boxes(data, start, start + length)
    if not any(b.payload_offset <= off < b.offset + b.size for b in boxes):
        return refused(data, sample=i, reason="in no top-level box's payload")
    if off in {b.payload_offset for b in boxes} and not layout.separate[i]:
        # The checksum then covers the whole mp4, as that of a picture with no thumbnail of its own.
        return reads(data, moved, {"moov"})
    return refused(data, sample=i, reason="checksum mismatch")


@FUZZ
@given(st.data())
def test_bogus_counts_and_fields(layout, index_fields, data):
    """32-bit values over the outer index's fields (counts, sizes, offsets) and the checksum table's."""
    f = data.draw(st.sampled_from(sorted(index_fields)).flatmap(lambda k: st.sampled_from(index_fields[k])))
    old = struct.unpack_from(">I", layout.data, f.pos)[0]
    value = data.draw(
        st.one_of(
            st.sampled_from([0, 1, 8, 0xFFFFFFFF, 0x80000000, 1 << 20]),
            st.integers(0, len(layout.data)),
            st.integers(0, (1 << 32) - 1),
        ).filter(lambda v: v != old)
    )
    check_field(layout, f, value)


def test_a_name_that_is_not_utf8_is_refused_naming_its_sample(layout):
    (off, _, _), _ = layout.tracks[FNAME]
    data = _xor(layout.data, [(off + 7, 0x80)])  # sample 1's "b.jpg": '.' becomes 0xae
    refused(data, reason="checksum mismatch of the names", box=f"trak[{FNAME}]")  # with checksums
    refused(unchecked(data), sample=1, reason="filename is not valid UTF-8", offset=off + 7)


def test_a_zero_byte_input_sample_is_refused_as_such(layout):
    """Named as 0 bytes by the outer index, not as a per-image mp4 with no 'moov' (the op says the same)."""
    data = _overwrite_u32(layout.data, layout.stbl[INPUT]["stsz"].payload_offset + 12 + 4 * 1, 0)
    off = layout.tracks[INPUT][0][1]
    err = refused(data, sample=1, reason="input sample is 0 bytes, expected a per-image mp4", offset=off)
    assert err.box == f"trak[{INPUT}]"
    with BznaFile(io.BytesIO(data), name=NAME) as f:
        for read in (f.sample_bytes, f.sample):
            with pytest.raises(BznaFormatError, match="input sample is 0 bytes"):
                read(1)
        assert f.sample(2).input.size == (20, 30)  # the other samples read as before


# Exact messages for the common cases.


def _patch(data, find_type, rel, value, fmt=">I", nth=0):
    """Write ``value`` at ``rel`` bytes into the payload of the nth box of a type."""
    b = bytearray(data)
    hits = [o for o, _ in box_offsets(data) if data[o + 4 : o + 8] == find_type]
    o = hits[nth] + 8 + rel
    b[o : o + struct.calcsize(fmt)] = struct.pack(fmt, value)
    return bytes(b), o


def test_huge_stsz_count_is_refused_before_allocating(small_file):
    data, at = _patch(small_file, b"stsz", 8, 0x7FFFFFFF)  # sample_count of bzna_input
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    msg = str(e.value)
    assert "fuzzed.bzna" in msg and "stsz" in msg and "2147483647 entries" in msg
    assert e.value.box.endswith("stbl/stsz") and e.value.offset == at + 4


def test_offset_past_the_end_names_the_sample(small_file):
    data, _ = _patch(small_file, b"stco", 8 + 4, 0xFFFFFF00)  # second bzna_input offset
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    assert e.value.sample == 1 and "sample 1" in str(e.value)
    assert "past the end" in str(e.value)


def test_truncated_file_message(small_file):
    with pytest.raises(BznaFormatError) as e:
        read_everything(small_file[:100])
    assert "runs past the end of the file" in str(e.value) and e.value.offset == 24
    assert e.value.box == "mdat"


def test_bad_nal_length_names_sample_and_offset(small_file):
    with BznaFile(io.BytesIO(small_file)) as f:
        off = f.sample(2).input.sample_offset
    b = bytearray(small_file)
    b[off : off + 4] = struct.pack(">I", 10_000)
    # The file has checksums: the reader's check after parsing finds the change first.
    with pytest.raises(BznaFormatError, match="sample 2: checksum mismatch"):
        read_everything(bytes(b))
    with BznaFile(io.BytesIO(bytes(b))) as f, pytest.raises(BznaFormatError) as e:
        f.sample(2, verify=False).input.annexb()
    assert e.value.sample == 2 and e.value.offset == off
    assert "NAL unit length 10000" in str(e.value)


def test_not_a_bzna():
    with pytest.raises(BznaFormatError, match="expected an 'ftyp' box first"):
        BznaFile(io.BytesIO(b"\x00\x00\x00\x10junkjunkjunkjunk"), name="x")
    with pytest.raises(BznaFormatError, match="empty file"):
        BznaFile(io.BytesIO(b""), name="x")


def test_missing_moov(small_file):
    moov = [b for b in parse_boxes(small_file, 0, len(small_file)) if b.type == "moov"][0]
    with pytest.raises(BznaFormatError, match="no 'moov' box"):
        BznaFile(io.BytesIO(small_file[: moov.offset]), name="x")


def test_index_errors_are_not_format_errors(small_file):
    with BznaFile(io.BytesIO(small_file)) as f:
        with pytest.raises(IndexError):
            f.sample(3)
        assert f.filename(-1) == "c.jpg"


def test_huge_co64_offset_is_refused(tmp_path):
    path = tmp_path / "x.bzna"
    with BznaWriter(path, force_co64=True) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
        w.append(_pic(6, (300, 200), (512, 512)), target=4, filename="b.jpg")
    data, _ = _patch(path.read_bytes(), b"co64", 8 + 8, 0xFFFFFFFFFFFFFFF0, fmt=">Q")
    with BznaFile(io.BytesIO(data), name="fuzzed.bzna") as f:
        for get in (lambda: f.tracks["bzna_input"].offsets, lambda: f.sample(1)):
            with pytest.raises(BznaFormatError, match="past the end") as e:
                get()
            assert e.value.sample == 1 and "18446744073709551600" in str(e.value)
