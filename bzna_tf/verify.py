"""``bzna-tf verify``: check every checksum and decode every picture of .bzna files.

Bit rot in a picture's H.265 payload mostly decodes to a wrong, concealed
picture without any error: only a checksum sees it. :func:`verify` checks each
sample's pictures against the checksums the writer stored
(:mod:`bzna_tf.format.checksums`), and the outer index (moov, targets, names)
against theirs, then decodes each picture with the source op's decoder
(FFmpeg, through the ``BznaDecodeYuv420`` op) and checks the decoded frame
holds the image. Files without checksums (the original tools') are verified by
decoding only, which finds some damage, not all.

Samples are checked in parallel threads: reading and decoding release the
GIL, but each picture's parse and CRC-32C in Python (NumPy, in steps of a few
bytes per lane) hold it, about 1.8 ms a sample that more threads do not share
out. Without decoding, the samples of large files with checksums are checked
by the native reader instead (``read_samples``, the op ``as_dataset`` reads
with: the same parse and checksums, in C++, in parallel), and only those it
refuses are checked again in Python, which says what is wrong; see
:data:`NATIVE_MIN_SAMPLES`. The damaged samples can be written as an LBANN
exclusion sample list, which ``as_dataset(sample_list=...)`` takes to read
only the good ones.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import os
import re
import sys
import time
from dataclasses import dataclass, field

from bzna_tf.format.checksums import TRACKS, mismatch_reason
from bzna_tf.format.checksums import VERSION as CHECKSUM_VERSION
from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.progress import PlainProgress, progress_mode
from bzna_tf.format.reader import BznaFile, is_url
from bzna_tf.format.sample import INPUT, THUMB, parse_image_mp4
from bzna_tf.format.samplelist import SampleList
from bzna_tf.format.shards import expand_paths, open_file
from bzna_tf.format.wording import count

__all__ = ["Damage", "FileReport", "VerifyReport", "verify"]

KINDS = ("checksum", "decode", "format", "index")

# Without decoding, the samples of files with checksums are checked by the native reader when there are at
# least this many of them and the native ops are already built: below it, importing TensorFlow and loading
# the ops (seconds) costs more than the Python check of those samples (about 1.8 ms each), and a first use
# would compile the ops (minutes). The report is the same either way.
NATIVE_MIN_SAMPLES = 4096
NATIVE_CHUNK = 64  # samples per native read: its pictures are in memory at once, in each thread


@dataclass(frozen=True)
class Damage:
    """One problem found.

    Attributes:
      sample: the sample's index in its file (None for the outer index).
      track: the picture's track (``bzna_input`` or ``bzna_thumb``), or None.
      kind: ``"checksum"`` (the bytes differ from when the file was written),
        ``"decode"`` (the decoder refused the picture, or its frame is smaller
        than the image), ``"format"`` (the per-image mp4 does not parse) or
        ``"index"`` (the outer moov, targets or names changed).
      message: what is wrong, naming the file and the sample.
    """

    sample: int | None
    track: str | None
    kind: str
    message: str

    def to_json(self) -> dict:
        return {"sample": self.sample, "track": self.track, "kind": self.kind, "message": self.message}


@dataclass
class FileReport:
    """What :func:`verify` found in one file.

    Attributes:
      file: its path.
      samples: its sample count (0 when it could not be opened).
      checksums: the checksum table's description (``"CRC-32C of bzna_input,
        bzna_thumb"``), or None when the file has none.
      method: how its pictures were verified, in words.
      pictures_checked: pictures checked against a checksum.
      pictures_decoded: pictures decoded.
      damage: the problems, by sample.
      error: why the file could not be read at all, or None.
    """

    file: str
    samples: int = 0
    checksums: str | None = None
    method: str = ""
    pictures_checked: int = 0
    pictures_decoded: int = 0
    damage: list[Damage] = field(default_factory=list)
    error: str | None = None
    # The file opened (absolute for a local one): what the exclusion list names if ``file`` no longer leads
    # there (relative, the working directory changed since).
    _opened: str | None = field(default=None, repr=False, compare=False)

    @property
    def bad_samples(self) -> list[int]:
        """The damaged samples' indices in this file, sorted."""
        return sorted({d.sample for d in self.damage if d.sample is not None})

    @property
    def ok(self) -> bool:
        """Readable, and nothing damaged found (see also ``verified``)."""
        return self.error is None and not self.damage

    @property
    def verified(self) -> bool:
        """Whether anything was checked: False for a file without checksums when decoding is off."""
        return self.error is None and (self.samples == 0 or self.pictures_checked + self.pictures_decoded > 0)

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "samples": self.samples,
            "checksums": self.checksums,
            "method": self.method,
            "verified": self.verified,
            "pictures_checked": self.pictures_checked,
            "pictures_decoded": self.pictures_decoded,
            "damaged_samples": self.bad_samples,
            "damage": [d.to_json() for d in self.damage],
            "error": self.error,
        }


@dataclass
class VerifyReport:
    """What :func:`verify` found, file by file, and how long it took."""

    files: list[FileReport]
    seconds: float = 0.0
    sets: list[str] = field(default_factory=list)
    """Shard sets among the files that cannot be read as one (shards of two conversions), in words."""

    @property
    def ok(self) -> bool:
        """No damage found, every file verified, and no shard set of two conversions."""
        return all(f.ok and f.verified for f in self.files) and not self.sets

    @property
    def samples(self) -> int:
        return sum(f.samples for f in self.files)

    @property
    def damaged(self) -> int:
        return sum(len(f.bad_samples) for f in self.files)

    def exclusion_list(self, *, base: str | None = None) -> SampleList:
        """A ``CONDUIT_HDF5_EXCLUSION`` sample list leaving out every damaged sample.

        Files that could not be opened are on no line, so the list uses none
        of their samples. It names the files verified, whatever the working
        directory is now (a relative path, if it no longer leads there, by
        the absolute path opened).

        Args:
          base: the list's base directory (default: the files' common one).
        """
        readable = [f for f in self.files if f.error is None and f.samples]
        if not readable:
            raise ValueError("no file could be read: there is nothing for a sample list to use")
        paths, starts, good = [], [0], []
        for f in readable:
            bad = set(f.bad_samples)
            good.extend(starts[-1] + i for i in range(f.samples) if i not in bad)
            moved = f._opened is not None and not is_url(f.file) and os.path.abspath(f.file) != f._opened
            paths.append(f._opened if moved else f.file)
            starts.append(starts[-1] + f.samples)
        return SampleList.from_indices(paths, starts, good, kind="CONDUIT_HDF5_EXCLUSION", base=base)

    def to_json(self) -> dict:
        """One file: its object; several: ``{"files": [...], totals}`` (as ``bzna-tf info --json``)."""
        if len(self.files) == 1:
            return {**self.files[0].to_json(), "seconds": round(self.seconds, 3)}
        return {
            "files": [f.to_json() for f in self.files],
            "sets": self.sets,
            "samples": self.samples,
            "damaged": self.damaged,
            "seconds": round(self.seconds, 3),
        }


def _track_names(tracks) -> tuple[str, ...]:
    if isinstance(tracks, str):
        tracks = (tracks,)
    tracks = tuple(tracks)
    if not tracks or any(t not in TRACKS for t in tracks):
        raise ValueError(f"Expected tracks among {TRACKS}. Received: tracks={tracks!r}")
    return tracks


def _decoder():
    """bytes -> (height, width) of the decoded frame; raises ValueError when the decoder refuses them."""
    import tensorflow as tf

    from bzna_tf.decode import decode
    from bzna_tf.ops import ffmpeg_error, load_library

    load_library()
    why = ffmpeg_error()
    if why is not None:
        raise RuntimeError(f"bzna-tf verify cannot decode pictures: {why}")

    def run(annexb: bytes) -> tuple[int, int]:
        try:
            y, _, _ = decode(annexb)
        except tf.errors.InvalidArgumentError as e:
            # The decoder's own words, without TensorFlow's "{{function_node ...}}" and "[Op:...]".
            raise ValueError(re.sub(r"^\{\{[^}]*\}\}\s*|\s*\[Op:[^\]]*\].*$", "", e.message)) from None
        return int(y.shape[0]), int(y.shape[1])

    return run


def _check(f: BznaFile, i: int, tracks, decode) -> tuple[list[Damage], int, int]:
    """(damage, pictures checked against a checksum, pictures decoded) of sample i."""
    try:
        base = f.sample_location(i)[0]
        data = f.sample_bytes(i)
        img = parse_image_mp4(data, base=base, where=f._where(i))
        sums = f.sample_checksums(i, data, tracks=tracks)
    except BznaFormatError as e:
        return [Damage(i, None, "format", str(e))], 0, 0
    damage = [
        Damage(i, name, "checksum", f"{f.name}, sample {i}: {mismatch_reason(name, *sum_, base)}")
        for name, sum_ in sums.items()
        if sum_[0] != sum_[1]
    ]
    if damage or decode is None:  # a picture that changed is damaged, whatever it decodes to
        return damage, len(sums), 0
    decoded = 0
    for name in tracks:
        pic = img.thumb if name == THUMB else img.input
        if name == THUMB and not img.has_separate_thumb and INPUT in tracks:
            continue  # the same picture as the input: decoded once
        try:
            annexb = pic.annexb()
        except BznaFormatError as e:
            damage.append(Damage(i, name, "format", str(e)))
            continue
        try:
            h, w = decode(annexb)
        except ValueError as e:
            damage.append(Damage(i, name, "decode", f"{f.name}, sample {i}: its '{name}' picture: {e}"))
            continue
        decoded += 1
        if w < pic.width or h < pic.height:
            damage.append(
                Damage(
                    i,
                    name,
                    "decode",
                    f"{f.name}, sample {i}: its '{name}' picture decodes to a {w}x{h} frame, smaller than "
                    f"the {pic.width}x{pic.height} image",
                )
            )
    return damage, len(sums), decoded


def _natively_checkable(f: BznaFile) -> bool:
    """Whether the native reader checks every picture of ``f`` against a checksum, as :func:`_check` does:
    a local file whose checksum table this reader knows, with a column for each of its picture tracks."""
    table = f.checksums
    if f.path is None or is_url(f.path) or table is None or table.version != CHECKSUM_VERSION:
        return False
    return all(t in table.tracks for t in TRACKS if t in f.tracks)


def _native_reader(files, decode: bool):
    """:func:`_read_natively`, when the samples of ``files`` (those :func:`_natively_checkable`) are
    :data:`NATIVE_MIN_SAMPLES` or more, there is no decoding and the native ops are built; else None
    (all checked in Python)."""
    from bzna_tf._cache import ops_library_may_exist

    if decode or sum(len(f) for f in files) < NATIVE_MIN_SAMPLES:
        return None
    if not ops_library_may_exist():  # none built for any TensorFlow: not worth importing TensorFlow
        return None
    try:
        from bzna_tf.ops import _build, _load, verify_checksums

        if _load._module is None and _load._given_library() is None and not _build.plan().library.exists():
            return None  # not built for this TensorFlow: the first use would compile them, for minutes
        if not verify_checksums():  # turned off in this process: the reader would not check them
            return None
    except Exception:  # no TensorFlow, no compiler, a library that does not load: checked in Python
        return None
    return _read_natively


class _NativeFiles:
    """The files a run checks through the native reader, read as one list: one kernel for the run, and
    the op's arguments made once (made per call, they cost the run's file count each time)."""

    def __init__(self, paths, identities, starts):
        self.paths = list(paths)  # bytes: a name that is not UTF-8 reaches the op unchanged
        self.identities = list(identities)
        self.starts = list(starts)  # file k's first global index
        self._args = None

    @classmethod
    def of(cls, files) -> _NativeFiles:
        """The open local files ``files``, in this order."""
        starts = [0, *itertools.accumulate(len(f) for f in files)][:-1]
        return cls([os.fsencode(f.path) for f in files], [f.identity for f in files], starts)

    def op_arguments(self) -> tuple:
        """(the names as a string tensor, the identities as the op's attribute)."""
        if self._args is None:
            import tensorflow as tf

            from bzna_tf.ops.source import _identities

            names = tf.constant(self.paths, tf.string)
            self._args = names, _identities(self.identities, names)
        return self._args


def _read_natively(files: _NativeFiles, indices, track: str):
    """Each sample's error from the native reader (``read_samples`` with ``on_error="skip"``): b"" for a
    sample it read, checksums checked."""
    from bzna_tf.ops import load_library

    names, identities = files.op_arguments()
    out = load_library().bzna_read_samples(
        names, indices, track=track, with_filename=False, on_error="skip", identities=identities,
        working_directory="",
    )  # fmt: skip
    return out[5].numpy()


def _check_natively(read, files: _NativeFiles, k: int, f: BznaFile, start: int, stop: int, tracks) -> list:
    """[(damage, pictures checked, 0)] of samples ``start..stop-1`` of ``f`` (``files``' k-th), as
    :func:`_check` gives them.

    The native reader ``read`` reads each of their pictures in ``tracks`` (the full-size one always: its
    checksum covers the whole per-image mp4), parsing them and checking their checksums as the source op
    does. A sample it reads is good; one it refuses is checked by :func:`_check`, which says what is wrong
    (or finds nothing, when only a track that ``tracks`` leaves out is damaged). All are checked by
    :func:`_check` when the reader fails as a whole (the file changed, or cannot be read there), or when
    checksum verification was off at any moment of the read (another thread's ``verify_checksums``).
    """
    import numpy as np
    import tensorflow as tf

    from bzna_tf.ops import verify_checksums
    from bzna_tf.ops.checksums import _verification_offs

    indices = np.arange(start, stop, dtype=np.int64) + files.starts[k]
    refused = np.zeros(stop - start, bool)
    names = ("input", "thumb") if THUMB in tracks and THUMB in f.tracks else ("input",)
    offs = _verification_offs()
    trusted = verify_checksums()
    try:
        for name in names:
            refused |= read(files, indices, name) != b""
        # On before, on after, never turned off between: on for every picture read.
        trusted = trusted and verify_checksums() and _verification_offs() == offs
    except (tf.errors.OpError, ValueError, TypeError):  # the Python reader says what is wrong
        trusted = False
    if not trusted:
        refused[:] = True
    checked = sum(1 for t in f.checksums.tracks if t in tracks)
    return [
        _check(f, i, tracks, None) if refused[i - start] else ([], checked, 0) for i in range(start, stop)
    ]


def _unreadable_index(f) -> list[str]:
    """Why every reader refuses ``f``'s targets or names (a 0-byte target, a name that is not UTF-8):
    read as they read them, for files whose index no checksum covers (the original tools')."""
    problems = []
    for read in (lambda: f.targets, f.filenames):
        try:
            read()
        except BznaFormatError as e:
            problems.append(str(e))
    return problems


def _lost_checksums(said, table, pictures=()) -> str | None:
    """Why the checksum table is not the one the metadata says was written, or None.

    A file written with a table records its version and algorithm in its metadata: without the
    table (the file cut short at its last box), with another version or algorithm, or without a
    column for one of the file's picture tracks ``pictures`` (a damaged box: bzna_tf's writer writes
    one for each), its pictures would be read unchecked. A table of a format newer than this
    reader's, as the metadata says too, is not damage (it is ignored, the file verified by decoding).
    """
    if not isinstance(said, dict):
        return None  # written without one, or before the metadata said so
    wanted = (said.get("version"), said.get("algorithm"))
    if table is None:
        return (
            f"no checksum table, though the file's metadata says it was written with one (version "
            f"{wanted[0]}): the file was cut short, or its last box damaged"
        )
    if table.version != CHECKSUM_VERSION:  # a version this reader does not parse: its algorithm not read
        if table.version == wanted[0]:
            return None  # a newer format, as the metadata says: ignored, not damage
        return (
            f"the checksum table says version {table.version}, where the file's metadata says version "
            f"{wanted[0]}: the table is damaged"
        )
    found = (table.version, table.algorithm.decode("latin-1"))
    if found != wanted:
        return (
            f"the checksum table says version {found[0]}, algorithm {found[1]!r}, where the file's metadata "
            f"says version {wanted[0]}, algorithm {wanted[1]!r}: the table is damaged"
        )
    missing = [t for t in pictures if t not in table.tracks]
    if missing:
        return (
            f"the checksum table has no {missing[0]!r} column, where the file's metadata says it was written "
            "with a table (which holds a column for each picture track): the table is damaged, and those "
            "pictures would be read unchecked"
        )
    return None


def _method(table, tracks, decode) -> str:
    if table is not None and table.tracks:
        checked = [t for t in tracks if t in table.tracks]
        what = f"checksums of {', '.join(checked)}" if checked else "no checksum of these tracks"
        return f"{what} + decoding" if decode else what
    why = "no checksums" if table is None else table.describe()
    return f"{why}: verified by decoding only" if decode else f"{why}: not verified (decoding is off)"


def verify(
    paths,
    *,
    workers: int | None = None,
    tracks=TRACKS,
    decode: bool = True,
    progress=False,
    log=None,
) -> VerifyReport:
    """Checks every checksum and decodes every picture of .bzna files.

    Args:
      paths: a path, a directory, a glob pattern, or a list of them (shard
        sets must be complete, as everywhere).
      workers: threads (default: the CPU cores this process may use).
      tracks: the pictures to verify: ``"bzna_thumb"``, ``"bzna_input"`` or
        both (default).
      decode: also decode each picture (checksums alone are much quicker but
        leave files without checksums unverified).
      progress: the progress on ``log``: False or "none" (default) nothing; True or "auto" a bar on
        a terminal, plain lines elsewhere (a log file, a pipe: at least one a minute); "bar" or
        "lines" either one wherever ``log`` goes (:mod:`bzna_tf.format.progress`).
      log: where the progress goes (default ``sys.stderr``).

    Returns:
      A :class:`VerifyReport`; ``report.exclusion_list().write(path)`` writes
      the LBANN sample list that leaves the damaged samples out.

    Raises:
      ValueError: bad arguments, or no file to verify.
      RuntimeError: decoding asked for but FFmpeg unavailable.
    """
    tracks = _track_names(tracks)
    log = sys.stderr if log is None else log
    mode = progress_mode(progress, log)
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers < 1:
        raise ValueError(f"Expected workers >= 1. Received: workers={workers}")
    run = _decoder() if decode else None
    start = time.perf_counter()
    reports, opened = [], []
    for path in expand_paths(paths, every_file=True):
        r = FileReport(path)
        reports.append(r)
        try:
            # No descriptor held between reads: a thousand files must not all be open at once.
            f = open_file(path, keep_open=False)
        except (BznaFormatError, OSError) as e:
            r.error = str(e)
            continue
        r._opened = f.path
        try:
            with f.held_open():
                r.samples = len(f)
                table = f.checksums
                r.checksums = None if table is None else table.describe()
                r.method = _method(table, tracks, decode)
                changed = f.check_index()
                r.damage.extend(Damage(None, None, "index", m) for m in changed)
                if not changed:  # else reading the targets and names would say the same again
                    r.damage.extend(Damage(None, None, "index", m) for m in _unreadable_index(f))
                lost = _lost_checksums(
                    f.metadata.get("checksums"), table, [t for t in TRACKS if t in f.tracks]
                )
                if lost:
                    r.damage.append(Damage(None, None, "index", lost))
                if len(f):  # the lazily converted tables, before threads share them
                    f.sample_location(0)
                    if THUMB in f.tracks:
                        f.thumb_location(0)
        except BznaFormatError as e:
            r.error = str(e)
            f.close()
            continue
        opened.append((r, f))
    sets = _mixed_sets([f for _, f in opened])
    checkable = [f for _, f in opened if _natively_checkable(f)]
    read = _native_reader(checkable, decode)
    if read is None:
        checkable = []
    natives = _NativeFiles.of(checkable)
    native = {id(f): k for k, f in enumerate(checkable)}  # file -> its place in natives
    bar = None
    total = sum(r.samples for r, _ in opened)
    if mode == "lines":
        bar = PlainProgress(total, log, unit="samples")
    elif mode == "bar":
        from tqdm import tqdm

        bar = tqdm(total=total, unit="sample", file=log, smoothing=0.05)
    holds = []
    try:
        damaged = [0]
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            pending = collections.deque()

            def add(item):  # a bounded window of samples (and held files) in flight, collected in order
                pending.append(item)
                if len(pending) >= 4 * workers:
                    _collect(pending.popleft(), bar, damaged)

            for r, f in opened:
                # Each file open once while its samples are checked (not once per read).
                hold = contextlib.ExitStack()
                holds.append(hold)
                try:
                    hold.enter_context(f.held_open())
                except (BznaFormatError, OSError) as e:  # removed or replaced since its index was read
                    r.error = str(e)
                    continue
                k = native.get(id(f))
                if k is not None:
                    for first in range(0, len(f), NATIVE_CHUNK):
                        stop = min(first + NATIVE_CHUNK, len(f))
                        add((r, pool.submit(_check_natively, read, natives, k, f, first, stop, tracks)))
                else:
                    for i in range(len(f)):
                        add((r, pool.submit(_check, f, i, tracks, run)))
                add((None, hold))  # collected after the file's last sample: closes it
            while pending:
                _collect(pending.popleft(), bar, damaged)
    finally:
        if bar is not None:
            bar.close()
        for hold in holds:
            hold.close()
        for _, f in opened:
            f.close()
    for r in reports:
        r.damage.sort(key=lambda d: (-1 if d.sample is None else d.sample, d.track or ""))
    return VerifyReport(reports, time.perf_counter() - start, sets)


def _mixed_sets(files) -> list[str]:
    """Why shards of one set among ``files`` cannot be read as one (two conversions wrote them), or []:
    each file may be intact and the set still read some images twice and others never."""
    from bzna_tf.format.shards import check_conversions

    try:
        check_conversions(files)
    except (ValueError, OSError) as e:  # BznaFormatError: a metadata box that does not parse
        return [str(e)]
    return []


def _collect(item, bar, damaged):
    r, future = item
    if r is None:  # the hold of a file whose samples are all collected
        future.close()
        return
    result = future.result()  # one sample's (damage, checked, decoded), or a list of them
    for damage, checked, decoded in result if isinstance(result, list) else [result]:
        r.damage.extend(damage)
        r.pictures_checked += checked
        r.pictures_decoded += decoded
        if bar is not None:
            if damage:
                damaged[0] += 1
                bar.set_postfix_str(f"{damaged[0]} damaged", refresh=False)
            bar.update(1)


def format_report(report: VerifyReport, *, limit: int = 20) -> str:
    """The text ``bzna-tf verify`` prints: a line per file, its damage (at most ``limit`` lines), a total."""
    lines = []
    for r in report.files:
        if r.error is not None:
            lines.append(f"{r.file}: could not be read: {r.error}")
            continue
        bad = r.bad_samples
        verdict = "OK" if r.ok else count(len(bad), "damaged sample")
        if not r.ok and not bad:
            verdict = "damaged index"
        if r.ok and not r.verified:
            verdict = "NOT VERIFIED"
        lines.append(
            f"{r.file}: {count(r.samples, 'sample')}, {r.method} ({count(r.pictures_checked, 'picture')} "
            f"checked, {r.pictures_decoded:,} decoded): {verdict}"
        )
        lines += [f"  {d.kind}: {d.message}" for d in r.damage[:limit]]
        if len(r.damage) > limit:
            lines.append(f"  ... and {len(r.damage) - limit:,} more")
    lines += [f"shard set: {why}" for why in report.sets]
    rate = report.samples / report.seconds if report.seconds else 0.0
    bad = sum(1 for r in report.files if not r.ok)
    unverified = sum(1 for r in report.files if r.ok and not r.verified)
    tail = [count(report.damaged, "damaged sample")] if bad or report.sets else ["no damage found"]
    if bad:
        tail.append(f"{count(bad, 'file')} with problems")
    if report.sets:
        tail.append(f"{count(len(report.sets), 'shard set')} of two conversions")
    if unverified:  # a file without checksums with decoding off: nothing was checked
        tail.append(f"{count(unverified, 'file')} NOT VERIFIED")
    lines.append(
        f"checked {count(report.samples, 'sample')} in {count(len(report.files), 'file')} "
        f"in {report.seconds:.1f} s ({rate:,.1f} samples/s): " + ", ".join(tail)
    )
    return "\n".join(lines)
