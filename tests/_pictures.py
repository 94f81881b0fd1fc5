"""Fake pictures for the container's tests: a valid hvcC and slice payloads that no decoder accepts.

Apart from test_bad_input (whose property tests need Hypothesis), so that the test files that only
need these pictures (test_on_error, and test_gpu_dataset through it) import without Hypothesis:
tools/tf_carry runs them on a GPU machine where only TensorFlow, PyAV, tqdm and pytest are installed.
"""

import struct

from bzna_tf.format import HvcC, NalArray, Picture

HVCC = HvcC(
    profile_idc=1,
    level_idc=90,
    arrays=[
        NalArray(32, [b"\x40\x01\x0c\x01\xff\xff"]),
        NalArray(33, [b"\x42\x01\x01\x01\x60\x00\x00\x03"]),
        NalArray(34, [b"\x44\x01\xc0\x73"]),
    ],
)


def _pic(n, size, coded):
    nal = bytes([0x28, 0x01]) + bytes(range(n))
    return Picture(
        struct.pack(">I", len(nal)) + nal + struct.pack(">I", 3) + b"\x02\x01\x07", HVCC, size, coded
    )
