"""Reading TFRecord files of ``tf.train.Example`` without TensorFlow.

A TFRecord file is a sequence of records::

    uint64 length            little-endian
    uint32 masked_crc32c(length bytes)
    byte   data[length]      here: a serialised tf.train.Example
    uint32 masked_crc32c(data)

and an Example is the protocol buffer ``Example { Features features = 1; }``,
``Features { map<string, Feature> feature = 1; }``, ``Feature { oneof {
BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3;
} }``, each list holding ``repeated <type> value = 1`` (numbers packed or
not). Parsing that much of the wire format by hand keeps the converter's
worker processes free of TensorFlow (seconds of start-up and a gigabyte of
memory each) and lets a record be read without copying its image bytes.

Both checksums are verified: the length's guards the framing (a mismatch
ends the reading of the file), the data's the record itself (a flipped bit in
a label is otherwise stored as that label): a record whose data does not
match is a bad record (:class:`TFRecordDataError`, raised by
:func:`read_record`, yielded for its data by :func:`iter_records`), and the
records after it are still read. CRC-32C runs in NumPy (:mod:`bzna_tf.format.crc`), about a
millisecond per 100 kB record.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import numpy as np

from bzna_tf.format.checksums import masked_crc32c

__all__ = [
    "COMPRESSIONS",
    "TFRecordDataError",
    "TFRecordError",
    "count_records",
    "iter_records",
    "parse_example",
    "read_record",
    "record_offsets",
]

COMPRESSIONS = (None, "GZIP", "ZLIB")


class TFRecordError(ValueError):
    """A malformed TFRecord file or Example: names the file, the record and the byte offset."""


class TFRecordDataError(TFRecordError):
    """A record whose data does not match its checksum (corrupted): a bad record; the file reads on.

    Attributes:
      reason: what is wrong, without the file and record (which the message names first).
    """

    def __init__(self, where, reason):
        super().__init__(f"{where}: {reason}")
        self.reason = reason


def _data_error(where, data, footer) -> TFRecordDataError | None:
    """The error of a ``data`` that is not the record its ``footer`` (the masked CRC-32C) was written for."""
    (stored,) = struct.unpack("<I", footer)
    if masked_crc32c(data) == stored:
        return None
    return TFRecordDataError(
        where,
        "the data's checksum does not match: the record is corrupted (a changed byte in its label, name or "
        "image; TensorFlow's reader refuses it too)",
    )


class _StreamCutShort(EOFError):
    """A ZLIB stream that ends before its end marker (a file cut short)."""


class _TrailingData(ValueError):
    """Bytes after the end of a ZLIB stream."""


class _ZlibReader:
    """A file-like reader of a raw zlib stream (TFRecord's "ZLIB" compression).

    A stream cut short (its end marker missing) and bytes after the end of the
    stream are refused, as a truncated uncompressed file is: else the records
    past the cut, or in the trailing bytes, would be lost without a word
    (TensorFlow reads neither).
    """

    def __init__(self, f):
        self._f, self._z, self._buf = f, zlib.decompressobj(), b""

    def read(self, n):
        while len(self._buf) < n and not self._z.eof:
            chunk = self._f.read(1 << 20)
            if not chunk:
                raise _StreamCutShort("the ZLIB stream ends before its end marker")
            self._buf += self._z.decompress(chunk)
        if self._z.eof and len(self._buf) < n:
            after = len(self._z.unused_data) + os.fstat(self._f.fileno()).st_size - self._f.tell()
            if after > 0:
                raise _TrailingData(f"{after} bytes after the end of the ZLIB stream")
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self):
        self._f.close()


def _open(path, compression):
    if compression not in COMPRESSIONS:
        raise ValueError(f"Expected `compression` in {COMPRESSIONS}. Received: compression={compression!r}")
    if compression == "GZIP":
        return gzip.open(path, "rb")
    f = open(path, "rb")  # noqa: SIM115 (returned open)
    return _ZlibReader(f) if compression == "ZLIB" else f


def _record_length(header, where, offset, size):
    """The data length of the record whose 12-byte header is ``header``, checked.

    ``size``: the file's size when known (uncompressed), so a length running
    past the end is refused before anything is read or allocated.
    """
    if len(header) < 12:
        raise TFRecordError(f"{where}: truncated header ({len(header)} of 12 bytes)")
    length, length_crc = struct.unpack("<QI", header)
    if masked_crc32c(header[:8]) != length_crc:
        raise TFRecordError(
            f"{where}: the length's checksum does not match (not a TFRecord file, "
            "a compressed one read without `compression`, or corrupted)"
        )
    if size is not None and offset + 16 + length > size:
        raise TFRecordError(f"{where}: {length} bytes of data announced, {size - offset - 12} left")
    return length


def iter_records(path, compression=None, *, start=0, verify=True):
    """Yields ``(record_index, byte_offset, data)`` for every record of a TFRecord file.

    Offsets are in the uncompressed stream. ``start``: the first record to
    yield; in an uncompressed file the records before it are skipped by their
    headers alone. ``verify``: check each record's data against its checksum;
    a record that does not match is yielded with a :class:`TFRecordDataError`
    (saying so) for its data, and the records after it follow. Raises
    :class:`TFRecordError` on a truncated record, a length whose checksum does
    not match, or a compressed file that is cut short, is not valid
    compressed data, or (ZLIB) has bytes after its stream.
    """
    path = os.fspath(path)
    size = os.path.getsize(path) if compression is None else None
    f = _open(path, compression)
    index, offset = 0, 0
    try:
        while True:
            header = f.read(12)
            if not header:
                return
            where = f"{path}: record {index} at byte {offset}"
            length = _record_length(header, where, offset, size)
            if index < start and compression is None:
                f.seek(length + 4, os.SEEK_CUR)
                index += 1
                offset += 16 + length
                continue
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise TFRecordError(f"{where}: truncated data ({len(data)} of {length} bytes)")
            if index >= start:
                bad = _data_error(where, data, footer) if verify else None
                yield index, offset, (data if bad is None else bad)
            index += 1
            offset += 16 + length
    except EOFError as e:  # gzip's, and _ZlibReader's: the compressed stream ends before its end marker
        raise TFRecordError(
            f"{path}: the {compression} stream ends before its end marker, at record {index} (byte {offset} "
            f"of the uncompressed data; {_records(index)} read): the file is cut short (an interrupted copy "
            "or download?); copy it again"
        ) from e
    except _TrailingData as e:
        raise TFRecordError(
            f"{path}: {e}, after {_records(index)}: a ZLIB-compressed TFRecord file holds one stream, and "
            "TensorFlow reads only the first (several files joined into one?): convert the files it was "
            "made of"
        ) from e
    except (zlib.error, gzip.BadGzipFile) as e:
        raise TFRecordError(
            f"{path}: not valid {compression} data at record {index} (byte {offset} of the uncompressed "
            f"data; {_records(index)} read): {e}. Is --compression (compression=) the one the file was "
            "written with?"
        ) from e
    finally:
        f.close()


def _records(n) -> str:
    return f"{n} record{'' if n == 1 else 's'}"


def count_records(path, compression=None) -> int:
    """The number of records, reading only the headers of an uncompressed file."""
    if compression is not None:
        return sum(1 for _ in iter_records(path, compression, verify=False))
    return len(record_offsets(path))


def record_offsets(path) -> np.ndarray:
    """The byte offset of every record of an uncompressed file (int64), reading only their headers."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    offsets, offset = [], 0
    with open(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            offsets.append(offset)
            offset += 16 + _record_length(
                f.read(12), f"{path}: record {len(offsets) - 1} at byte {offset}", offset, size
            )
    return np.array(offsets, np.int64)


def read_record(f, path, index, offset) -> bytes:
    """The data of record ``index`` at byte ``offset`` of the open uncompressed file ``f`` (of ``path``).

    Raises:
      TFRecordDataError: the data does not match its checksum.
      TFRecordError: a truncated record, or a length whose checksum does not match.
    """
    where = f"{path}: record {index} at byte {offset}"
    f.seek(offset)
    length = _record_length(f.read(12), where, offset, None)
    data = f.read(length)
    footer = f.read(4)
    if len(data) < length or len(footer) < 4:
        raise TFRecordError(f"{where}: truncated data ({len(data)} of {length} bytes)")
    bad = _data_error(where, data, footer)
    if bad is not None:
        raise bad
    return data


# --------------------------------------------------------------------------- protocol buffers


def _varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def _fields(buf):
    """Yields (field_number, wire_type, value): an int (varint, fixed) or a memoryview (bytes)."""
    buf = memoryview(buf)
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise ValueError("truncated 64-bit field")
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError(f"field {number}: {length} bytes announced, {len(buf) - pos} left")
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise ValueError("truncated 32-bit field")
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def _int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _feature_values(feature):
    """The values of one serialised Feature: a list of bytes, floats or ints."""
    for kind, wire, lst in _fields(feature):
        if wire != 2:
            raise ValueError(f"Feature field {kind}: wire type {wire}, expected a list")
        values = []
        for number, w, v in _fields(lst):
            if number != 1:
                continue
            if kind == 1 and w == 2:
                values.append(bytes(v))
            elif kind == 2 and w == 2:
                values.extend(struct.unpack(f"<{len(v) // 4}f", v))
            elif kind == 2 and w == 5:
                values.append(struct.unpack("<f", v.to_bytes(4, "little"))[0])
            elif kind == 3 and w == 2:
                pos = 0
                while pos < len(v):
                    x, pos = _varint(v, pos)
                    values.append(_int64(x))
            elif kind == 3 and w == 0:
                values.append(_int64(v))
            else:
                raise ValueError(f"Feature kind {kind}: unexpected wire type {w}")
        return values
    return []


def parse_example(data, keys=None) -> dict:
    """The features of a serialised tf.train.Example: {key: list of bytes | float | int}.

    Args:
      data: the serialised Example.
      keys: only decode these keys (the others are skipped); default all.

    Raises:
      ValueError: malformed protocol buffer data.
    """
    features = {}
    for number, wire, value in _fields(data):
        if number != 1 or wire != 2:
            continue
        for n, w, entry in _fields(value):
            if n != 1 or w != 2:
                continue
            key, feature = None, b""
            for en, ew, ev in _fields(entry):
                if en == 1 and ew == 2:
                    key = bytes(ev).decode("utf-8")
                elif en == 2 and ew == 2:
                    feature = ev
            if key is not None and (keys is None or key in keys):
                features[key] = _feature_values(feature)
    return features
