"""Images from WebDataset tar shards: ``key.jpg`` + ``key.cls`` (or ``key.json``) members, one sample per key.

A WebDataset shard is a plain tar file whose members are grouped into
samples by key, as the ``webdataset`` package groups them: a member name is
split at the first '.' of its last path part (``a/b/0001.seg.png`` -> key
``a/b/0001``, extension ``seg.png``; extensions are compared lower-cased),
and consecutive members with the same key form one sample. Members that are
not regular files (directories, links, devices, sparse files), names without
an extension and top-level ``__meta__`` names are not samples; the source's
notes count and name the links and the like and the names without an
extension.

The member headers are read once, seeking over the data (nothing is
unpacked), into a compact index: arrays of offsets, sizes and extension ids
and one buffer of keys, a few tens of bytes per member, so a shard of
millions of members costs tens of megabytes. Members that are not samples
are only counted. Each image is then read at its byte offset, in any order,
by the worker that decodes it (the main process holds no image bytes), so a
shuffled conversion reads each image once. The headers are parsed here
rather than with Python's ``tarfile``, which keeps an object of about 1 kB
per member: ustar and v7 headers, GNU long names and links, pax extended
and global headers (``path``, ``linkpath``, ``size``), base-256 sizes. The
``webdataset`` package is not used: it only streams shards from their
start, which the shuffled order, shards and resumed conversions cannot use.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from array import array

import numpy as np

from bzna_tf.convert.sources.base import (
    ALLOW_UNLABELLED_HINT,
    IMAGE_EXTENSIONS,
    Item,
    LabelledSource,
    SourceError,
    allow_unlabelled_fact,
    expand_patterns,
    file_facts,
)
from bzna_tf.format.wording import count

__all__ = ["WebDatasetSource", "expand_braces"]

AUTO = "auto"
# Image extensions a sample's image member may have (lower-cased, without the dot).
IMAGE_KEYS = tuple(e[1:] for e in IMAGE_EXTENSIONS)
# Label members tried, in this order, by label_key="auto" (then the json member's "label" field).
AUTO_LABELS = ("cls", "cls.txt")
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
_BRACE = re.compile(r"\{([^{}]*)\}")
# The most bytes of a label member (cls, cls.txt, json) read: labels are read in the main process, where a
# member of gigabytes named 0001.cls must not be read whole. Such a member is a bad sample (--on-error skip).
MAX_LABEL_BYTES = 1 << 20
_BLOCK = 512
# The most bytes of a GNU long name or pax extended header read: each holds a name and a few numbers, so a
# larger one is a damaged shard, not a name to read into memory.
_MAX_HEADER_DATA = 1 << 20
# Type flags (tar's typeflag byte). Regular files: '0', NUL (old tars) and '7' (contiguous), as tarfile.
_REGULAR = frozenset(b"0\x007")
_DIRECTORY = ord("5")
_GNU_LONG = {ord("L"): "path", ord("K"): "linkpath"}
_PAX = frozenset(b"xgX")  # pax extended header, pax global header, Solaris' older extended header
_GNU_SPARSE = ord("S")
# Members that hold no data of their own: their size field is not skipped (as tarfile reads them).
_NO_DATA = {ord("1"): "hard link", ord("2"): "symbolic link", ord("3"): "character device",
            ord("4"): "block device", ord("6"): "FIFO"}  # fmt: skip


def expand_braces(pattern: str) -> list[str]:
    """``train-{000..002}.tar`` -> three names; ``{a,b}`` lists too (as WebDataset and the shell write them).

    A numeric range keeps the width of its first bound when that is
    zero-padded (``{000000..000146}``). Several braces expand left to right.
    """
    m = _BRACE.search(pattern)
    if m is None:
        return [pattern]
    body = m.group(1)
    rng = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if rng:
        a, b = rng.group(1), rng.group(2)
        if int(b) < int(a):
            raise SourceError(f"{pattern!r}: the range {{{body}}} goes down")
        width = len(a) if a.startswith("0") else 0
        choices = [f"{k:0{width}d}" for k in range(int(a), int(b) + 1)]
    elif "," in body:
        choices = body.split(",")
    else:
        raise SourceError(f"{pattern!r}: expected {{A..B}} or {{x,y,...}} in braces. Received: {{{body}}}")
    out = []
    for c in choices:
        out += expand_braces(pattern[: m.start()] + c + pattern[m.end() :])
    return out


_NAME = re.compile(r"((?:.*/|)[^./]+)\.([^/]*)")


def split_name(name: str):
    """(key, extension) of a member name as WebDataset splits it, or None for a name without extension."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return m.group(1), m.group(2).lower()


class _Sample:
    """One key of a shard: its members' (offset, size) by extension, and why it cannot be converted.

    ``name`` is the name it is stored under: its key, or ``SHARD/KEY`` with ``per_shard_keys``."""

    __slots__ = ("shard", "key", "name", "members", "error")

    def __init__(self, shard, key, name, members, error):
        self.shard, self.key, self.name, self.members, self.error = shard, key, name, members, error


class _Index:
    """The samples of every shard in compact arrays: about 30 bytes per member, plus the keys' bytes.

    Sample ``i`` (numbered over the shards in order) has the members
    ``first[i]:first[i + 1]`` (their extension ids, data offsets and sizes)
    and the key ``keys[key_at[i]:key_at[i + 1]]`` (UTF-8, undecodable bytes
    kept as surrogates, as ``tarfile`` decodes names). A ``tarfile.TarInfo``
    per member would be about 1 kB.
    """

    def __init__(self):
        self.keys = bytearray()
        self.key_at = array("q", [0])
        self.first = array("q", [0])
        self.ext = array("i")
        self.offset = array("q")
        self.size = array("q")
        self.ext_ids = {}  # extension -> its id in `ext`
        self.ext_names = []
        self.errors = {}  # sample -> why it cannot be converted
        self.starts = [0]  # the first sample of each shard, then the total
        self.hashes = array("q")  # hash(name) of each sample, to find a name seen twice (then dropped)
        # With per_shard_keys: each shard's "SHARD/" (see _shard_names), before its samples' keys.
        self.prefixes = None

    def __len__(self):
        return len(self.first) - 1

    def new_sample(self, key):
        """A sample of the shard being read (the last one of ``starts``)."""
        self.hashes.append(hash(key if self.prefixes is None else self.prefixes[len(self.starts) - 1] + key))
        self.keys += key.encode("utf-8", "surrogateescape")
        self.key_at.append(len(self.keys))
        self.first.append(len(self.ext))

    def add(self, ext, offset, size):
        """A member of the last sample."""
        e = self.ext_ids.get(ext)
        if e is None:
            e = self.ext_ids[ext] = len(self.ext_names)
            self.ext_names.append(ext)
        self.ext.append(e)
        self.offset.append(offset)
        self.size.append(size)
        self.first[-1] = len(self.ext)

    def key(self, i):
        return bytes(self.keys[self.key_at[i] : self.key_at[i + 1]]).decode("utf-8", "surrogateescape")

    def shard(self, i):
        return bisect.bisect_right(self.starts, i) - 1

    def name(self, i):
        """The name sample ``i`` is stored under: its key, or its shard's prefix and its key."""
        return self.key(i) if self.prefixes is None else self.prefixes[self.shard(i)] + self.key(i)

    def repeated(self):
        """(the first sample whose name an earlier one has, that earlier one, how many samples repeat a
        name), or None when every name is once (the names: the keys, or ``SHARD/KEY`` with prefixes).

        The names' hashes are sorted to find the candidates (no set of the names is built: a shard set of
        millions of keys costs 8 bytes a key), which are then compared by their names.
        """
        hashes = np.frombuffer(self.hashes, np.int64)
        order = np.argsort(hashes, kind="stable")  # equal hashes stay in sample order
        ordered = hashes[order]
        first_pair, repeats = None, 0
        for at in np.flatnonzero(ordered[1:] == ordered[:-1]) + 1:
            j, key = int(order[at]), self.name(int(order[at]))
            earlier = at - 1
            while earlier >= 0 and ordered[earlier] == ordered[at]:  # a hash collision is not a repeat
                i = int(order[earlier])
                if self.name(i) == key:
                    repeats += 1
                    if first_pair is None or j < first_pair[0]:
                        first_pair = (j, i)
                    break
                earlier -= 1
        return None if first_pair is None else (*first_pair, repeats)

    def sample(self, i):
        key, shard = self.key(i), self.shard(i)
        name = key if self.prefixes is None else self.prefixes[shard] + key
        members = {
            self.ext_names[self.ext[m]]: (self.offset[m], self.size[m])
            for m in range(self.first[i], self.first[i + 1])
        }
        return _Sample(shard, key, name, members, self.errors.get(i))

    def samples_with(self, ext):
        """The indices of the samples with an ``ext`` member, in order (an int64 array)."""
        e = self.ext_ids.get(ext)
        if e is None:
            return np.zeros(0, np.int64)
        members = np.flatnonzero(np.frombuffer(self.ext, np.int32) == e)
        return np.unique(np.searchsorted(np.frombuffer(self.first, np.int64), members, side="right") - 1)


def _number(field):
    """A tar header's number: octal text, or base-256 (GNU, for sizes from 8 GiB); ValueError if neither."""
    if field[0] in (0x80, 0xFF):
        n = int.from_bytes(field[1:], "big")
        return n if field[0] == 0x80 else n - (1 << (8 * (len(field) - 1)))
    return int(field.split(b"\0", 1)[0].strip() or b"0", 8)


def _text(raw):
    """A name from a header: UTF-8, other bytes kept as surrogates (as ``tarfile`` decodes names)."""
    return raw.decode("utf-8", "surrogateescape")


def _header_error(buf):
    """Why a 512-byte block is not a tar header, or "" when it is one (its checksum matches)."""
    try:
        stored = _number(buf[148:156])
    except ValueError:
        return "an unreadable checksum"
    unsigned = sum(buf) - sum(buf[148:156]) + 8 * 32  # the checksum field counts as spaces
    if stored == unsigned:
        return ""
    # Some old tars summed signed chars.
    signed = unsigned - 256 * sum(b >= 128 for b in buf[:148] + buf[156:])
    return "" if stored == signed else "a bad checksum"


_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")


def _pax_records(data):
    """The records of a pax header (``"LENGTH keyword=value\\n"`` each), as ``tarfile`` reads them."""
    out, pos = {}, 0
    while True:
        m = _PAX_RECORD.match(data, pos)
        if m is None:
            return out
        length = int(m.group(1))
        if length == 0:
            raise ValueError("a pax record of length 0")
        out[_text(m.group(2))] = _text(data[m.end(2) + 1 : m.start(1) + length - 1])
        pos += length


def _padded(size):
    return -(-size // _BLOCK) * _BLOCK


def _tar_members(f, path, file_size):
    """Yields ``(name, kind, offset, size, linkname)`` for each member of an uncompressed tar file, in order.

    ``kind``: "file", "directory", "sparse file", one of ``_NO_DATA``'s words,
    or "type 'V'" for other type flags. GNU long names and links and pax
    headers are applied to the member after them (a pax global header to all
    later ones), not yielded. A member whose data runs past the end of the
    file is the last one yielded (a regular one; another kind raises).

    Raises:
      SourceError: not a tar file, or a damaged header (naming its byte and the member before it).
    """
    pos, at, last = 0, -1, None  # at: where the file is, so that it seeks only to skip data
    globals_, pending = {}, {}

    def damaged(at, what):
        after = f"after member {last!r}" if last is not None else "at its start"
        return SourceError(
            f"{path}: corrupt tar header at byte {at} ({after}): {what}; the shard is damaged (re-download "
            "or re-create it, or leave it out)"
        )

    while True:
        if at != pos:
            f.seek(pos)
        buf = f.read(_BLOCK)
        at = pos + len(buf)
        why = _header_error(buf) if len(buf) == _BLOCK else "a truncated header"
        if why:
            if pending:
                raise damaged(pos, "an extended header (GNU long name or pax) with no member after it")
            if buf.count(0) == len(buf):  # the end: zeros, or the end of the file
                if pos == 0 and not buf:
                    raise SourceError(f"{path}: not a readable tar file: empty file")
                _check_end(f, path, pos, file_size, last)
                return
            if pos == 0:
                raise SourceError(f"{path}: not a readable tar file: {why} at its start")
            raise damaged(
                pos, f"{why}: the {file_size - pos} bytes from byte {pos} on cannot be read as members"
            )
        kind = buf[156]
        try:
            size = _number(buf[124:136])
        except ValueError:
            size = -1
        if size < 0:
            raise damaged(pos, f"an unreadable size {bytes(buf[124:136])!r}")
        if kind in _GNU_LONG or kind in _PAX:
            what = "GNU long name" if kind in _GNU_LONG else "pax extended"
            if size > _MAX_HEADER_DATA:
                raise damaged(
                    pos,
                    f"a {what} header of {size} bytes (such a header holds a name and a few values: at "
                    f"most {_MAX_HEADER_DATA} bytes are read)",
                )
            data = f.read(size)
            at += len(data)
            if len(data) < size:
                raise damaged(pos, f"a {what} header of {size} bytes cut short by the end of the file")
            if kind in _GNU_LONG:
                pending.setdefault(_GNU_LONG[kind], _text(data.split(b"\0", 1)[0]))
            else:
                try:
                    records = _pax_records(data)
                except ValueError as e:
                    raise damaged(pos, f"an unreadable pax header ({e})") from None
                if kind == ord("g"):
                    globals_.update(records)
                else:
                    for k, v in records.items():
                        pending.setdefault(k, v)
            pos += _BLOCK + _padded(size)
            continue
        info = {**globals_, **pending} if globals_ else pending
        pending = {}
        if "path" in info:
            name = info["path"]
        else:
            name = _text(buf[:100].split(b"\0", 1)[0])
            prefix = buf[345:500].split(b"\0", 1)[0] if kind != _GNU_SPARSE else b""
            if prefix:  # a ustar name over 100 bytes
                name = _text(prefix) + "/" + name
        if "size" in info:
            try:
                size = int(info["size"])
            except ValueError:
                size = -1
            if size < 0:
                raise damaged(pos, f"an unreadable size {info['size']!r} in its pax header")
        link = info["linkpath"] if "linkpath" in info else _text(buf[157:257].split(b"\0", 1)[0])
        offset = pos + _BLOCK
        if kind in _REGULAR:
            if kind == 0 and name.endswith("/"):  # an old tar's directory
                kind = "directory"
            elif any(k.startswith("GNU.sparse.") for k in info):  # a pax-format sparse file
                kind, name = "sparse file", info.get("GNU.sparse.name", name)
            else:
                kind = "file"
        elif kind == _DIRECTORY:
            kind = "directory"
        elif kind in _NO_DATA:
            kind = _NO_DATA[kind]
        elif kind == _GNU_SPARSE:
            kind = "sparse file"
            extended = buf[482]
            while extended:  # more blocks of the sparse map before the data
                f.seek(offset)
                more = f.read(_BLOCK)
                at = offset + len(more)
                if len(more) < _BLOCK:
                    raise damaged(pos, "a sparse file's map cut short by the end of the file")
                extended, offset = more[504], offset + _BLOCK
        else:
            kind = f"type {chr(kind)!r}"
        holds_data = kind not in ("directory", *_NO_DATA.values())
        if holds_data and offset + size > file_size:
            if kind != "file":
                raise damaged(pos, f"member {name!r} ({kind}) of {size} bytes runs past the end of the file")
            yield name, kind, offset, size, link
            return
        yield name, kind, offset, size, link
        last = name
        pos = offset + _padded(size) if holds_data else offset


def _check_end(f, path, end, file_size, last):
    """Refuses anything but zeros after the end of the archive: a corrupt header that hides the rest."""
    f.seek(end)
    pos = end
    while True:
        block = f.read(1 << 20)
        if not block:
            return
        if block.count(0) != len(block):
            at = pos + next(i for i, b in enumerate(block) if b)
            after = f"after member {last!r}" if last is not None else "at its start"
            raise SourceError(
                f"{path}: corrupt tar header at byte {at} ({after}): the {file_size - end} bytes from byte "
                f"{end} on cannot be read as members; the shard is damaged (re-download or re-create it, or "
                "leave it out)"
            )
        pos += len(block)


def _unstorable(key):
    """Why a key cannot be stored as a file name (the .bzna writer's rule), or None."""
    if key.startswith("/"):
        return "is an absolute path"
    parts = key.split("/")
    if ".." in parts:
        return "has a '..' part"
    if "" in parts or "." in parts:
        return "has an empty or '.' part"
    if "\0" in key:
        return "holds a NUL"
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8"
    return None


def _few(shown, n):
    """The first three of ``shown`` (already worded), then how many there are in all."""
    return ", ".join(shown[:3]) + (f", ... ({n:,} in all)" if n > 3 else "")


class WebDatasetSource(LabelledSource):
    """Images from WebDataset tar shards (``NNNNNN.tar`` of ``key.jpg`` + ``key.cls`` / ``key.json``).

    Samples are grouped by key as WebDataset groups them (consecutive members
    with the same key, see this module's notes); they are converted in shard
    order (shards sorted by name within each pattern), then member order. The
    stored file name of a sample is its key (with ``per_shard_keys``,
    ``SHARD/KEY``).

    Args:
      patterns: tar files, glob patterns (``"shards/train-*.tar"``) or brace
        patterns (``"train-{000000..000146}.tar"``); ``~`` is expanded.
      image_key: the extension of the image member (``"jpg"``, ``"png"``,
        ``"seg.png"``, ...); None: the sample's one member whose extension is an
        image's (jpg, jpeg, png, bmp, gif, webp, tif, tiff, ppm, pgm). A sample
        with several (``jpg`` and ``png``) is refused, naming them.
      label_key: where the label is: ``"auto"`` (default): the ``cls`` member
        if any sample has one, else ``cls.txt`` if any sample has one, else the
        ``"label"`` field of the ``json`` member if any sample's has one (else
        every image is unlabelled, and the summary says so); an extension
        (``"cls"``, ``"class.txt"``): that member, an integer as text;
        ``"json:FIELD"``: that field of the ``json`` member (``json:meta.label``
        for a nested one); None: every image is unlabelled.
      class_names: the class names indexed by target (default: none).
      allow_unlabelled: store a sample without its label member or field (or
        whose field is null) as an unlabelled image. By default such a sample
        is a bad record: the conversion stops, naming its shard and key, or
        skips it with ``on_error="skip"``.
      per_shard_keys: for shards whose keys start again in each shard (keys
        ``00000``, ... in every shard, as some writers number them): each
        sample is stored as ``SHARD/KEY``, ``SHARD`` its shard's file name
        without ``.tar`` (``train-000001/00000``), so that a key may be in
        several shards; a key twice in one shard is still refused. When two
        shards have one file name (``part1/shard-000000.tar`` and
        ``part2/shard-000000.tar``), ``SHARD`` is each shard's path from the
        shards' common folder, without ``.tar`` (``part2/shard-000000/00000``).
        By default a key in two shards is refused (a shard named twice or
        copied).

    Raises:
      SourceError: a key in two shards (without ``per_shard_keys``; with it,
        two samples stored under one name, or two shards of one name without
        ``.tar`` in one folder) or twice in one shard, a file that is not
        a tar file, a compressed one (decompress it first), a corrupt header
        that hides the rest of a shard (or a GNU long name or pax header over
        1 MiB), or no pattern match. A bad sample
        (no image member, an empty or truncated one, a label that is not an
        integer or is missing, a label member over ``MAX_LABEL_BYTES`` (1 MiB),
        a key that cannot be a stored file name, as ``../../x`` or ``/x``) does
        not raise here: it is reported when converted (see ``convert``'s
        ``on_error``). So is an image member over the conversion's
        ``max_image_bytes``, which the worker refuses unread.
    """

    kind = "webdataset"
    cli_help = "WebDataset tar shards, glob or brace patterns (train-{000000..000146}.tar; quote them)"
    cli_options = ("image_key", "label_key", "allow_unlabelled", "per_shard_keys")

    def __init__(self, patterns, *, image_key=None, label_key=AUTO, class_names=None, allow_unlabelled=False,
                 per_shard_keys=False):  # fmt: skip
        if isinstance(patterns, (str, os.PathLike)):
            patterns = [patterns]
        expanded = [name for p in patterns for name in expand_braces(os.fspath(p))]
        self.paths = expand_patterns(expanded, "tar shard")
        self.image_key = image_key.lower().lstrip(".") if image_key else None
        self.class_names = list(class_names) if class_names is not None else None
        self.allow_unlabelled = bool(allow_unlabelled)
        self.per_shard_keys = bool(per_shard_keys)
        self._shard_names, self._shard_root = _shard_names(self.paths)
        if self.per_shard_keys:
            self._check_shard_names()
        self._idx = None
        self._index()
        self.label_key = self._resolve_label(label_key)
        notes = []
        n, shown = self._not_taken
        if n:
            notes.append(f"not taken: {count(n, 'tar member')} without an extension ({_few(shown, n)})")
        n, shown = self._not_regular
        if n:
            what = "is not a regular file" if n == 1 else "are not regular files"
            notes.append(f"not taken: {count(n, 'tar member')} that {what} ({_few(shown, n)})")
        if self.label_key is None and label_key == AUTO:
            notes.append(
                "no label: no sample has a cls or cls.txt member or a json 'label' field; stored unlabelled "
                "(--label-key names the label's member or json:FIELD)"
            )
        self._no_label = (
            "without a label: no sample has a cls or cls.txt member or a json 'label' field"
            if label_key == AUTO
            else "without a label (--label-key '', label_key=None)"
        )
        self.notes = tuple(notes)

    def __getstate__(self):
        # The member index is rebuilt in each process from the headers rather than shipped.
        return {**self.__dict__, "_idx": None}

    def _check_shard_names(self):
        """Refuses, with per_shard_keys, two shards stored under one name or a name that cannot be stored."""
        seen = {}
        for path, stem in zip(self.paths, self._shard_names, strict=True):
            why = _unstorable(stem)
            if why:
                raise SourceError(
                    f"{path}: with --per-shard-keys (per_shard_keys=True) each sample is stored as "
                    f"SHARD/KEY, {_SHARD_RULE}, and {stem!r} {why}: rename the shard"
                )
            if stem in seen:  # left only in one folder: x.tar and x.TAR, or x and x.tar
                raise SourceError(
                    f"{seen[stem]} and {path} have one name without .tar ({stem!r}): with --per-shard-keys "
                    f"(per_shard_keys=True) each sample is stored as SHARD/KEY, {_SHARD_RULE}, so their "
                    "samples would be stored under the same names. Leave out a shard that is a copy of the "
                    "other; if they hold different samples, rename one"
                )
            seen[stem] = path

    def _index(self):
        """Reads every member header of every shard (seeking over the data) into ``self._idx``."""
        idx = _Index()
        if self.per_shard_keys:
            idx.prefixes = [name + "/" for name in self._shard_names]
        # Members that are not samples are counted, with the first three names for the summary.
        self._not_taken, self._not_regular = [0, []], [0, []]
        for path in self.paths:
            self._read_headers(path, idx)
            idx.starts.append(len(idx))
        self._refuse_repeated_keys(idx)
        idx.hashes = None
        self._idx = idx

    def _refuse_repeated_keys(self, idx):
        """Raises SourceError when a key names two samples: in one shard (members of one sample apart, or a
        sample added twice), or in two (a shard named twice or copied, or keys that start again in each
        shard: per_shard_keys)."""
        found = idx.repeated()
        if found is None:
            return
        j, i, repeats = found
        later, earlier = idx.sample(j), idx.sample(i)
        more = f" ({repeats:,} samples in all repeat an earlier key)" if repeats > 1 else ""

        def members(sample):
            """'members 0001.jpg, 0001.cls at byte 512' (where the first one's data starts)."""
            names = [f"{sample.key}.{ext}" for ext in sample.members]
            first = min(offset for offset, _ in sample.members.values())
            return f"{'member' if len(names) == 1 else 'members'} {', '.join(names)} at byte {first}"

        if later.shard == earlier.shard:
            between = j - i - 1
            raise SourceError(
                f"{self.paths[later.shard]}: key {later.key!r} appears again later in the shard: "
                f"{members(earlier)}, then, after {count(between, 'other sample')}, {members(later)}. The "
                "members of one sample must be next to each other in the tar, as WebDataset reads them, and "
                "a key names one sample (the image is stored under it): re-create the shard with each "
                f"sample's members together and each key once{more}"
            )
        if self.per_shard_keys:  # a shard in a folder named as another shard: p/a.tar's x/0 and p/a/x.tar's 0
            raise SourceError(
                f"{members(earlier)} of {self.paths[earlier.shard]} and {members(later)} of "
                f"{self.paths[later.shard]} would both be stored as {later.name!r}: with --per-shard-keys "
                f"(per_shard_keys=True) each sample is stored as SHARD/KEY, {_SHARD_RULE}, and a name holds "
                f"one image. Leave one of the shards out, or convert it on its own{more}"
            )
        raise SourceError(
            f"key {later.key!r} is in two shards: {members(earlier)} of {self.paths[earlier.shard]}, and "
            f"{members(later)} of {self.paths[later.shard]}: a shard named twice or copied would store its "
            "images twice, and a key names one sample (the image is stored under it). Leave the repeated "
            "shard out; if the shards hold different samples (keys that start again in each shard), convert "
            "with --per-shard-keys (per_shard_keys=True), which stores each sample under its shard's name "
            f"and its key ({self._shard_names[later.shard]}/{later.key}){more}"
        )

    def _loaded(self):
        if self._idx is None:
            self._index()
        return self._idx

    def _read_headers(self, path, idx):
        size = os.path.getsize(path)
        # A large buffer: the headers of small members are read without a system call each.
        with open(path, "rb", buffering=1 << 16) as f:
            magic = f.read(6)
            for prefix, what in _COMPRESSED.items():
                if magic.startswith(prefix):
                    raise SourceError(
                        f"{path}: a {what}-compressed tar file; tar shards are read at their members' "
                        f"offsets, which needs an uncompressed tar: decompress it first (e.g. {what} -d)"
                    )
            key = None
            exts = set()
            for name, kind, offset, length, link in _tar_members(f, path, size):
                while name.startswith("./"):  # `tar -cf x.tar .` in the shard's folder: the same paths
                    name = name[2:]
                if kind != "file":
                    if kind != "directory":  # links, devices, ...: noted, so that nothing goes silently
                        to = f" to {link!r}" if kind.endswith("link") else ""
                        _tally(self._not_regular, f"{name!r} ({kind}{to})")
                    continue
                if "/" not in name and name.startswith("__") and name.endswith("__"):
                    continue
                parts = split_name(name)
                if parts is None:
                    _tally(self._not_taken, repr(name))
                    continue
                if parts[0] != key:
                    key, exts = parts[0], set()
                    idx.new_sample(key)
                    # A key of one part is [^./]+ (split_name): only others can be unfit to store.
                    why = _unstorable(key) if "/" in key or not key.isascii() or "\0" in key else None
                    if why:
                        idx.errors[len(idx) - 1] = (
                            f"member {name!r}: its key {why}; the key is the sample's stored file name, a "
                            "relative path without empty, '.' or '..' parts"
                        )
                ext = parts[1]
                if ext in exts:
                    idx.errors.setdefault(len(idx) - 1, f"two members with the extension {ext!r} ({name})")
                exts.add(ext)
                idx.add(ext, offset, min(length, size))  # a truncated one's may not fit in 64 bits
                if offset + length > size:  # the last member yielded
                    idx.errors[len(idx) - 1] = (
                        f"member {name!r} is truncated: it declares {length} bytes at byte {offset}, the "
                        f"file ends {size - offset} bytes after it starts"
                    )

    def _read(self, f, path, sample, ext):
        """A label member's bytes (at most MAX_LABEL_BYTES; the images are read by the workers)."""
        offset, size = sample.members[ext]
        if size > MAX_LABEL_BYTES:
            raise _BadSample(
                f"member {sample.key}.{ext} is {size:,} bytes, over the {MAX_LABEL_BYTES:,}-byte limit on a "
                "label member (it holds a label, not data)"
            )
        f.seek(offset)
        data = f.read(size)
        if len(data) != size:
            raise _BadSample(f"member {sample.key}.{ext} is truncated: {len(data)} of {size} bytes")
        return data

    def _any_json_label(self):
        """Whether some sample's json member has a "label" field (read in order, up to the first that has)."""
        idx = self._idx
        f, shard = None, None
        try:
            for i in idx.samples_with("json"):
                sample = idx.sample(int(i))
                if sample.error:
                    continue
                if sample.shard != shard:
                    if f is not None:
                        f.close()
                    shard = sample.shard
                    f = open(self.paths[shard], "rb")  # noqa: SIM115 (closed below)
                try:
                    meta = json.loads(self._read(f, self.paths[shard], sample, "json"))
                except (ValueError, _BadSample):
                    continue
                if isinstance(meta, dict) and "label" in meta:
                    return True
        finally:
            if f is not None:
                f.close()
        return False

    def _resolve_label(self, label_key):
        if label_key is None or label_key == "":
            return None
        if label_key != AUTO:
            if label_key.startswith("json:") and not label_key[5:]:
                raise ValueError(f"Expected json:FIELD as label_key. Received: label_key={label_key!r}")
            return label_key if label_key.startswith("json:") else label_key.lower().lstrip(".")
        # Every sample has a say: one sample without its label member must not decide the labels of all.
        for ext in AUTO_LABELS:
            if ext in self._idx.ext_ids:
                return ext
        return "json:label" if self._any_json_label() else None

    def __len__(self):
        return len(self._loaded())

    def _reads_labels(self):
        return self.label_key is not None

    def labelled(self):
        if self.label_key is not None and self.label_key.startswith("json:"):
            return None  # known only once each json member is read
        return super().labelled()

    def _has_label(self):
        if self.label_key.startswith("json:"):
            return None  # known only once each json member is read
        idx = self._loaded()
        has = np.zeros(len(idx), bool)
        has[idx.samples_with(self.label_key)] = True
        return has

    def _describe(self):
        # With per_shard_keys, the files' names are what the samples are stored under: their paths from the
        # shards' common folder when their file names repeat (never the case in conversions made before).
        root = self._shard_root if self.per_shard_keys else None
        return {
            "files": [file_facts(p, root) for p in self.paths],
            "image_key": self.image_key,
            "label_key": self.label_key,
            **allow_unlabelled_fact(self.allow_unlabelled),
            # Present only when set, as allow_unlabelled: the fingerprints of earlier conversions still match.
            **({"per_shard_keys": True} if self.per_shard_keys else {}),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The samples at ``indices`` (over all shards).

        Each image is given as its shard's path and its member's offset and
        size: the worker that decodes it reads it."""
        idx = self._loaded()
        total = len(idx)
        handles = {}
        try:
            for i in indices:
                i = int(i)
                if not 0 <= i < total:
                    raise IndexError(f"sample {i} out of range: the shards hold {total}")
                sample = idx.sample(i)
                path = self.paths[sample.shard]
                f = handles.get(sample.shard)
                if f is None:
                    if len(handles) >= 64:  # a shuffled order visits every shard: keep a few open
                        handles.pop(next(iter(handles))).close()
                    f = handles[sample.shard] = open(path, "rb")  # noqa: SIM115 (closed below)
                yield self._item(f, path, sample)
        finally:
            for f in handles.values():
                f.close()

    def _image_ext(self, sample):
        if self.image_key is not None:
            if self.image_key not in sample.members:
                raise _BadSample(
                    f"no {self.image_key!r} member (--image-key); the sample has {_exts(sample)}"
                )
            return self.image_key
        found = [ext for ext in sample.members if ext in IMAGE_KEYS]
        if not found:
            raise _BadSample(
                f"no image member; the sample has {_exts(sample)} and images are taken from "
                f"{', '.join(IMAGE_KEYS)} members: name another extension with --image-key (image_key=)"
            )
        if len(found) > 1:
            raise _BadSample(
                f"several image members ({', '.join(found)}): name the one to convert with --image-key "
                "(image_key=)"
            )
        return found[0]

    def _missing(self, why, unlabelled):
        """(None, why unlabelled) with ``allow_unlabelled``; else the sample is a bad record."""
        if self.allow_unlabelled:
            return None, f"{unlabelled} (--allow-unlabelled)"
        raise _BadSample(f"no label: {why}; {ALLOW_UNLABELLED_HINT}")

    def _target(self, f, path, sample):
        """(target, None), or (None, why the image is unlabelled)."""
        key = self.label_key
        if key is None:
            return None, self._no_label
        if key.startswith("json:"):
            field = key[5:]
            unlabelled = f"without a {field!r} field in a json member"
            if "json" not in sample.members:
                return self._missing(f"no json member (the sample has {_exts(sample)})", unlabelled)
            raw = self._read(f, path, sample, "json")
            try:
                value = json.loads(raw)
            except ValueError as e:
                raise _BadSample(f"member {sample.key}.json is not JSON: {e}") from e
            for part in field.split("."):
                if not isinstance(value, dict) or part not in value:
                    return self._missing(f"member {sample.key}.json has no field {field!r}", unlabelled)
                value = value[part]
            if value is None:
                return self._missing(f"field {field!r} of member {sample.key}.json is null", unlabelled)
            if isinstance(value, bool) or not isinstance(value, int):
                raise _BadSample(
                    f"field {key[5:]!r} of member {sample.key}.json is {value!r}, not an integer label "
                    "(a .bzna file stores one integer target per image)"
                )
            return value, None
        if key not in sample.members:
            return self._missing(
                f"no {key!r} member (the sample has {_exts(sample)})", f"without a {key!r} member"
            )
        raw = self._read(f, path, sample, key)
        text = raw.decode("utf-8", "replace").strip()
        try:
            return int(text), None
        except ValueError:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise _BadSample(
                f"member {sample.key}.{key} holds {shown!r}, not an integer label (a .bzna file stores one "
                "integer target per image; name another member with --label-key)"
            ) from None

    def _item(self, f, path, sample):
        origin = f"{path} key {sample.key!r}"
        try:
            if sample.error:
                raise _BadSample(sample.error)
            ext = self._image_ext(sample)
            offset, size = sample.members[ext]
            if size == 0:
                raise _BadSample(f"member {sample.key}.{ext} is empty (0 bytes)")
            target, unlabelled = self._target(f, path, sample)
        except _BadSample as e:
            return Item(sample.name, None, data=b"", origin=origin, error=str(e))
        return Item(sample.name, target, path=path, offset=offset, size=size, member=f"{sample.key}.{ext}",
                    origin=origin, unlabelled=unlabelled)  # fmt: skip

    @classmethod
    def from_cli(cls, paths, *, image_key=None, label_key=None, allow_unlabelled=False, per_shard_keys=False):
        return cls(paths, image_key=image_key, label_key=AUTO if label_key is None else (label_key or None),
                   allow_unlabelled=allow_unlabelled, per_shard_keys=per_shard_keys)  # fmt: skip


# How per_shard_keys names a shard's folder (in messages, after "stored as SHARD/KEY, ").
_SHARD_RULE = (
    "SHARD the shard's file name without .tar (its path from the shards' common folder when two shards have "
    "one file name)"
)


def _without_tar(name):
    return name[:-4] if name.lower().endswith(".tar") else name


def _shard_names(paths):
    """(the folder each shard's samples are stored in with per_shard_keys, the folder the names start in).

    A shard's file name without .tar (``train-000001``; folder None). When
    two shards have one such name (``part1/shard-000000.tar`` and
    ``part2/shard-000000.tar``, as two img2dataset runs leave them), every
    shard's path from the shards' common folder, without .tar
    (``part2/shard-000000``), and that folder: the names of shards whose file
    names differ are the same as before (stored names and fingerprints).
    """
    names = [_without_tar(os.path.basename(p)) for p in paths]
    if len(set(names)) == len(names):
        return names, None
    full = [os.path.abspath(p) for p in paths]
    root = os.path.commonpath([os.path.dirname(p) for p in full])
    return [_without_tar(os.path.relpath(p, root).replace(os.sep, "/")) for p in full], root


def _tally(seen, shown):
    """Counts one member not taken in ``seen`` ([count, the first three, worded])."""
    seen[0] += 1
    if len(seen[1]) < 3:
        seen[1].append(shown)


class _BadSample(Exception):
    """A sample that cannot be converted (turned into an Item with ``error``)."""


def _exts(sample):
    return "members " + ", ".join(f"{sample.key}.{ext}" for ext in sample.members)
