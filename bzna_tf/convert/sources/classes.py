"""Classes given by name (``classes=``, ``--classes``), and the refusal of a held-out split numbered unlike
the training file beside it: shared by the sources that number classes by sorting names (an image folder's
class folders, GulpIO's string labels).

A validation split that lacks a class numbers the classes after it one lower
than the training split does when each is numbered on its own: its images
would be stored with other classes' targets, without a word. A source says
what its names are (:class:`ClassWords`), reads ``classes=`` with
:class:`ClassList` and refuses such a split with :func:`check_beside_training`.
"""

from __future__ import annotations

import glob
import os
import re
import unicodedata
from dataclasses import dataclass

from bzna_tf.convert.sources.base import SourceError, escaped_name
from bzna_tf.format.reader import BznaFile, is_url
from bzna_tf.format.shards import SHARD_NAME, BznaShards, check_shard_sets, shard_sets
from bzna_tf.format.sniff import SNIFF_BYTES, sniff
from bzna_tf.format.wording import count

__all__ = [
    "HELD_OUT_WORDS",
    "TRAIN_WORDS",
    "ClassList",
    "ClassWords",
    "check_beside_training",
    "few_names",
    "is_utf8",
    "name_forms",
    "name_tokens",
    "nfc",
]


@dataclass(frozen=True)
class ClassWords:
    """How a source's messages name the names its classes are numbered by.

    Attributes:
      name: one of those names ("class folder name", "label").
      numbers: what a names list numbers ("class folders", "the videos' labels").
      one: each target's name ("the name of its class folder", "the label of its videos").
      own: how the source numbers its classes on its own ("numbered by its own folders").
      lacks: the words before the training file's classes that the source lacks ("this folder has no").
      these: the source's classes, in "to number {these} on their own" ("this folder's classes").
    """

    name: str
    numbers: str
    one: str
    own: str
    lacks: str
    these: str

    @property
    def names(self) -> str:
        """The names, plural ("class folder names")."""
        return f"{self.name}s"

    @property
    def forms(self) -> str:
        """What ``classes`` takes, for messages."""
        return (
            f"a list of {self.names} by target (classes=[...]), a text file of them, one per line (--classes "
            "FILE), or a .bzna file whose stored class names are taken (--classes train.bzna)"
        )

    @property
    def per_line(self) -> str:
        """How a text file lists them ("one class folder name per line")."""
        return f"one {self.name} per line"


def is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 come as lone surrogates from os.scandir
        return False
    return True


def few_names(names, limit=5) -> str:
    """:func:`few` of names; those that are not UTF-8 with their bytes as ``\\xNN`` (not doubled by repr)."""
    shown = ", ".join(repr(n) if is_utf8(n) else f"'{escaped_name(n)}'" for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


# classes=: where the class names come from, and the words of a held-out split's name (check_output).
HELD_OUT_WORDS = frozenset(
    {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout"}
)
TRAIN_WORDS = frozenset({"train", "training"})
_MAX_CLASSES_FILE = 64 << 20  # a names file of 21k classes takes ~0.5 MB: a larger file is something else


def _set_stem(name: str) -> str:
    """The name a .bzna file's dataset goes by: a shard's set's stem (``"x-00000-of-00002.bzna"`` -> ``"x"``),
    else the name without ``.bzna``."""
    m = SHARD_NAME.match(name)
    if m:
        return m["stem"]
    return name[: -len(".bzna")] if name.lower().endswith(".bzna") else name


def name_tokens(stem: str) -> list:
    """The runs of letters and of digits of a name, lower-cased, in order (``"CIFAR10-val"`` -> ["cifar",
    "10", "val"]): what two names of one dataset's splits share, whatever separates them."""
    return re.findall(r"[a-z]+|[0-9]+", stem.lower())


def _same_dataset(held_out: list, train: list) -> bool:
    """Whether ``train`` (tokens of a name) is ``held_out``'s with its held-out split word(s) swapped for
    train/training: pets-val <-> pets-train, val <-> train, imagenet-validation <-> imagenet-train."""
    if len(held_out) != len(train):
        return False
    swapped = [(h, t) for h, t in zip(held_out, train, strict=True) if h != t]
    return bool(swapped) and all(h in HELD_OUT_WORDS and t in TRAIN_WORDS for h, t in swapped)


def nfc(name: str) -> str:
    """A name's Unicode NFC form: one class's folder name as Linux and Windows write it (NFC) and as macOS
    and some zip tools do (NFD, accents as combining characters) are two strings of one canonical form."""
    return unicodedata.normalize("NFC", name)


def name_forms(a: str, b: str) -> str:
    """How two names of one NFC form differ, for messages (they print alike)."""

    def form(n):
        return "NFC" if n == nfc(n) else "NFD" if n == unicodedata.normalize("NFD", n) else "mixed"

    return f"{a!r} ({form(a)}: {ascii(a)}) and {b!r} ({form(b)}: {ascii(b)})"


class ClassList:
    """``classes=`` read: ``names`` by target, ``where`` (how messages name them) and ``stored`` (True when
    the names are a .bzna file's stored class names, which ``--class-names`` may have renamed); ``words``:
    the source's :class:`ClassWords`, for messages."""

    def __init__(self, classes, words: ClassWords):
        self.words = words
        self.stored = False
        if isinstance(classes, (str, os.PathLike)):
            path = os.path.expanduser(os.fspath(classes))
            shards = self._shards(path)
            if shards is not None or self._is_bzna(path):
                self.stored = True
                self.where = f"the class names stored in {escaped_name(path)}"
                self.names = self._from_bzna(path, shards)
                self._check(escaped_name(path), "target", 0)
            else:
                self.where = f"the classes listed in {escaped_name(path)}"
                self.names = self._from_text(path)
                self._check(escaped_name(path), "line", 1)
            return
        if not isinstance(classes, (list, tuple)) or not all(isinstance(n, str) for n in classes):
            raise TypeError(f"Expected `classes` as {self.words.forms}. Received: classes={classes!r}")
        self.where = "the classes given (classes=)"
        self.names = list(classes)
        self._check("classes=", "target", 0)

    @staticmethod
    def _shards(path):
        """The shards STEM-0000k-of-0000N.bzna of a missing ``path`` STEM.bzna, or None."""
        if os.path.lexists(path) or not path.lower().endswith(".bzna"):
            return None
        folder, base = os.path.split(path)
        stem = base[: -len(".bzna")]
        found = []
        for p in sorted(glob.glob(os.path.join(glob.escape(folder), glob.escape(stem) + "-*-of-*.bzna"))):
            m = SHARD_NAME.match(os.path.basename(p))
            if m and m["stem"] == stem:
                found.append(p)
        if not found:
            return None
        check_shard_sets(found, escaped_name(path))  # complete, and one set
        return found

    def _is_bzna(self, path) -> bool:
        if os.path.isdir(path):
            raise SourceError(f"{escaped_name(path)}: a folder. Expected as classes {self.words.forms}")
        if not os.path.exists(path):
            raise SourceError(f"{escaped_name(path)}: no such file. Expected as classes {self.words.forms}")
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
        return head[4:8] == b"ftyp" or path.lower().endswith(".bzna")

    def _from_bzna(self, path, shards):
        name = escaped_name(path)
        if shards is None:
            with BznaFile(path) as f:
                names = f.class_names
        else:
            with BznaShards(shards) as f:
                names = f.class_names
            first = escaped_name(os.path.basename(shards[0]))
            name = f"{name} (its {count(len(shards), 'shard')}, {first}, ...)"
        if not names:
            raise SourceError(
                f"{name} stores no class names (its conversion gave none): it cannot number "
                f"{self.words.numbers}. Give the classes as a list or a text file of {self.words.names}, one "
                "per line by target"
            )
        holes = [t for t, n in enumerate(names) if n is None]
        if holes:
            shown = ", ".join(map(str, holes[:8])) + (", ..." if len(holes) > 8 else "")
            raise SourceError(
                f"{name} stores no name for {count(len(holes), 'target')} of its {len(names)} ({shown}): the "
                "classes after a target without a name cannot be numbered. Give the classes as a list or a "
                f"text file of {self.words.names}, one per line by target"
            )
        return names

    def _from_text(self, path):
        name = escaped_name(path)
        with open(path, "rb") as f:
            data = f.read(_MAX_CLASSES_FILE + 1)
        what = sniff(data[:SNIFF_BYTES])
        if what not in (None, "a text file") or len(data) > _MAX_CLASSES_FILE:
            looks = f"it looks like {what}" if what not in (None, "a text file") else "it is over 64 MiB"
            raise SourceError(
                f"{name}: not a list of class names ({looks}). Expected as classes {self.words.forms}"
            )
        try:
            text = data.decode("utf-8-sig")  # a byte order mark (Windows' Notepad) is not part of a name
        except UnicodeDecodeError as e:
            at = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)  # counted after the mark
            raise SourceError(
                f"{name}: not UTF-8 text (byte {at}): expected {self.words.names} in UTF-8, one per line"
            ) from None
        lines = [line.removesuffix("\r") for line in text.split("\n")]
        while lines and not lines[-1].strip():
            lines.pop()
        return lines

    def _check(self, what, position, first):
        """Refuses no class, an empty name and a name listed twice; ``position``: "line" or "target"."""
        if not self.names:
            raise SourceError(f"{what}: no class listed. Expected as classes {self.words.forms}")
        for k, n in enumerate(self.names):
            if not n.strip():
                raise SourceError(
                    f"{what}: {position} {k + first} is {'empty' if not n else 'blank'}: each target needs "
                    f"{self.words.one}"
                )
            if not is_utf8(n):
                raise SourceError(f"{what}: {position} {k + first} is not valid UTF-8 ({few_names([n])})")
        at = {}
        for k, n in enumerate(self.names):  # two spellings of one NFC form name one class
            at.setdefault(nfc(n), []).append(k + first)
        twice = {n: ks for n, ks in at.items() if len(ks) > 1}
        if twice:
            shown = ", ".join(
                f"{self.names[ks[0] - first]!r} ({position}s {', '.join(map(str, ks))})"
                for ks in list(twice.values())[:5]
            )
            raise SourceError(
                f"{what}: {count(len(twice), 'class', 'classes')} listed more than once: {shown}"
                f"{', ...' if len(twice) > 5 else ''}. A class has one target: list each class once"
            )


def check_beside_training(output, names, subject: str, words: ClassWords) -> None:
    """Refuses to write a held-out split whose classes its source numbered on its own unlike the training
    file beside ``output`` (a source's ``check_output``, called by :func:`~bzna_tf.convert.convert` before
    any work, when its classes were not given).

    Refused when all of this holds (else nothing is said: only a sure
    mismatch is refused): ``output``'s name has a word of a held-out split
    (``val``, ``validation``, ``test``, ...) and none of ``train``; a
    ``.bzna`` file (or set of shards) beside ``output`` is the training file
    of the same dataset (its name is ``output``'s with the held-out word
    swapped for ``train`` or ``training``, compared by words and numbers,
    case-insensitively: ``pets-val.bzna`` and ``pets-train.bzna``,
    ``imagenet-validation-00000-of-00004.bzna`` and
    ``imagenet-train-*-of-*.bzna``) and stores class names; a class name
    to be stored is among them (compared in Unicode NFC) with another
    target there, or, where no target differs, spelled in another
    Unicode form (NFD and NFC: readers refuse names that disagree).

    Args:
      output: the conversion's output (a local path; a URL is not looked at).
      names: the class names the conversion stores, by target (None: nothing to compare).
      subject: what the message starts with: the source (its folder, its chunks).
      words: how the message names the source's names and its numbering.

    Raises:
      SourceError: naming the class with two targets and how to choose (``classes``).
    """
    output = os.fspath(output)
    if not names or any(not isinstance(n, str) for n in names) or is_url(output):
        return
    folder, base = os.path.split(output)
    if not base or os.path.isdir(output):  # not a file name: the converter says so
        return
    tokens = name_tokens(_set_stem(base))  # a shard's name: its set's
    if not set(tokens) & HELD_OUT_WORDS or set(tokens) & TRAIN_WORDS:
        return
    try:
        entries = sorted(os.listdir(folder or "."))
    except OSError:
        return
    # Only the training file of this dataset: the output's name with its split word swapped for train
    # (the output's own file and shards have the split word, so are not among them).
    candidates = [
        os.path.join(folder, n)
        for n in entries
        if n.lower().endswith(".bzna")
        and not n.startswith(".")
        and _same_dataset(tokens, name_tokens(_set_stem(n)))
    ]
    for how, paths in shard_sets(candidates).items():
        try:  # one file says: a folder conversion stores every class name in each shard
            with BznaFile(paths[0], keep_open=False) as f:
                theirs = f.class_names
        except (OSError, ValueError):  # unreadable, or being replaced: nothing sure to say
            continue
        # Names compared in NFC: a folder copied from macOS may spell a training class's name in NFD.
        # A name may name several targets there (names given with --class-names: ImageNet's "crane").
        theirs = list(theirs or ())
        targets = {}
        for u, x in enumerate(theirs):
            if x is not None:
                targets.setdefault(nfc(x), []).append(u)
        shared = [(t, n, targets[nfc(n)]) for t, n in enumerate(names) if nfc(n) in targets]
        moved = [(t, n, us[0], theirs[us[0]]) for t, n, us in shared if t not in us]
        moved = moved or [(t, n, t, theirs[t]) for t, n, _ in shared if theirs[t] != n]
        if not moved:
            continue
        t, n, u, m = moved[0]
        ours = {nfc(x) for x in names}
        lacking = [x for x in theirs if x is not None and nfc(x) not in ours]
        lacks = f"; {words.lacks} {few_names(lacking)}" if lacking else ""
        given = paths[0]  # a set of shards by the name they derive from, which --classes reads
        shard = SHARD_NAME.match(os.path.basename(given))
        if len(paths) > 1 and not os.path.lexists(os.path.join(folder, f"{shard['stem']}.bzna")):
            given = os.path.join(folder, f"{shard['stem']}.bzna")
        if u != t:
            wrong = (
                f"its classes, {words.own}, would get other targets than in {how} beside "
                f"{escaped_name(base)}: {n!r} would be target {t} here and is target {u} there{lacks}"
            )
        else:
            wrong = (
                f"its class {t} would be stored under another name than in {how} beside "
                f"{escaped_name(base)}: {name_forms(n, m)}, one name in two Unicode forms, and readers "
                "refuse files whose class names disagree"
            )
        if any(len(us) > 1 for us in targets.values()):  # --classes takes the source's names, one each
            how_to = (
                f"Give the {words.names} by target, as {how} was converted from them "
                f"(classes=[...], --classes FILE: {words.per_line})"
            )
        else:
            how_to = (
                f"Pass classes={given!r} (--classes {given}) to number them as {how} does; or, to number "
                f"{words.these} on their own, give them yourself (classes=[...], --classes FILE: "
                f"{words.per_line}, by target)"
            )
        raise SourceError(f"{subject}: {wrong}. {how_to}")
