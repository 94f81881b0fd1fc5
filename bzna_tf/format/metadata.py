"""bzna_tf's own facts about a file, in a top-level ``uuid`` box the original tools ignore.

::

    ftyp | mdat | moov | uuid
                         size32, 'uuid', usertype (16 bytes: METADATA_UUID),
                         then one UTF-8 JSON object (keys sorted, no spaces)

ISO/IEC 14496-12 reserves ``uuid`` boxes for private extensions: a reader
that does not know the usertype skips the box, as the original Benzina
tools do (they look up ``moov`` and its tracks by name and nothing else).
Putting it after ``moov`` leaves every byte before it (``ftyp``, ``mdat``,
``moov``) exactly as the original tools would write them.

Keys written by the converter (all optional; readers ignore unknown keys):

- ``class_names``: a list indexed by target; ``null`` where a target's name
  is unknown (TFRecords give names only for the labels they hold).
- ``conversion``: ``{"fingerprint", "shard", "num_shards", "start", "stop",
  "skipped"}``: the source fingerprint and input range of a converted shard,
  which a rerun checks before skipping the shard.
"""

from __future__ import annotations

import json
import uuid

from bzna_tf.format.boxes import box

__all__ = ["METADATA_UUID", "MAX_METADATA_BYTES", "build_metadata_box", "parse_metadata"]

# uuid5(NAMESPACE_URL, "https://bzna_tf/metadata/1"): fixed forever.
METADATA_UUID = uuid.uuid5(uuid.NAMESPACE_URL, "https://bzna_tf/metadata/1").bytes
# A sanity bound (class names of 21k classes take ~0.5 MB): a larger box is a
# malformed file, not something to allocate.
MAX_METADATA_BYTES = 64 << 20


def encode_metadata(metadata: dict) -> bytes:
    """The JSON payload: deterministic (sorted keys, no spaces), so identical inputs give identical files."""
    return json.dumps(metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def build_metadata_box(metadata: dict) -> bytes:
    """The ``uuid`` box holding ``metadata`` (a JSON-serialisable dict)."""
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict. Received: metadata={metadata!r}")
    return box(b"uuid", METADATA_UUID, encode_metadata(metadata))


def parse_metadata(payload: bytes, where, offset: int) -> dict:
    """The dict stored in a metadata box's payload (after the usertype).

    Raises:
      BznaFormatError: not a UTF-8 JSON object (named with the file and offset).
    """
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise where.error(f"bzna_tf metadata is not UTF-8 JSON: {e}", offset=offset, box="uuid") from None
    if not isinstance(value, dict):
        raise where.error(
            f"bzna_tf metadata must be a JSON object, found {type(value).__name__}", offset=offset, box="uuid"
        )
    return value
