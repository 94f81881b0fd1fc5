"""CPU decoding (FFmpeg's HEVC decoder through PyAV) of what the source op emits.

Measured on the original-tools fixture (12 images, this decoder):
  every decoded frame's MD5 equals the one ffmpeg 5.1 gave the fixture's authors;
  input pictures vs the source JPEGs: PSNR 33.9 to 44.4 dB (mean 39.8);
  thumbnails vs the source JPEGs resized (TF bicubic, antialiased): 33.9 to 44.2 dB (mean 39.5).
The threshold the issue sets is 30 dB.
"""

import hashlib

import numpy as np
import pytest
import tensorflow as tf

from bzna_tf.decode import DecodeError, decode, decode_annexb
from bzna_tf.ops import BznaDataset


def _ycbcr_to_rgb(y, cb, cr, w, h):
    """Full-range BT.601, chroma upsampled by pixel replication (the manifest's definition)."""
    up = lambda p: np.repeat(np.repeat(p, 2, 0), 2, 1)[: y.shape[0], : y.shape[1]]  # noqa: E731
    y, cb, cr = (a.astype(np.float64) for a in (y, up(cb), up(cr)))
    rgb = np.stack(
        [y + 1.402 * (cr - 128), y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128), y + 1.772 * (cb - 128)],
        -1,
    )
    return np.clip(np.round(rgb), 0, 255)[:h, :w]


def _psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255**2 / mse)


@pytest.fixture(scope="module")
def decoded(original_path):
    out = {}
    for track in ("thumb", "input"):
        for e in BznaDataset(original_path, track=track):
            out[track, int(e["index"])] = (
                decode_annexb(e["data"].numpy()),
                int(e["width"]),
                int(e["height"]),
            )
    return out


def test_decoded_frames_are_bit_exact(decoded, manifest):
    for (track, i), ((y, cb, cr), _, _) in decoded.items():
        expected = manifest["samples"][i]["decoded"][track]
        assert [y.shape[1], y.shape[0]] == expected["frame_size"]
        assert cb.shape == cr.shape == (y.shape[0] // 2, y.shape[1] // 2)
        md5 = hashlib.md5(y.tobytes() + cb.tobytes() + cr.tobytes()).hexdigest()
        assert md5 == expected["yuv420p_md5"], (track, i)


def test_psnr_against_the_source_jpegs(decoded, manifest, original_path):
    figures = {"input": [], "thumb": []}
    for (track, i), (planes, w, h) in decoded.items():
        src_file = original_path.parent / manifest["samples"][i]["source"]["file"]
        src = tf.io.decode_image(src_file.read_bytes(), channels=3, expand_animations=False)
        if (w, h) != (src.shape[1], src.shape[0]):
            src = tf.image.resize(tf.cast(src, tf.float32), (h, w), method="bicubic", antialias=True)
            src = tf.clip_by_value(tf.round(src), 0, 255)
        figures[track].append(_psnr(_ycbcr_to_rgb(*planes, w, h), src.numpy()))
    for track, values in figures.items():
        assert min(values) >= 30, (track, [round(v, 1) for v in values])
    print({t: (round(min(v), 1), round(float(np.mean(v)), 1), round(max(v), 1)) for t, v in figures.items()})


def test_decode_inside_a_parallel_tf_data_map(original_path, decoded):
    ds = BznaDataset(original_path).map(
        lambda e: (e["index"], *decode(e["data"])), num_parallel_calls=4, deterministic=True
    )
    for i, y, cb, cr in ds:
        (ey, ecb, ecr), _, _ = decoded["thumb", int(i)]
        assert y.shape == (512, 512) and cb.shape == (256, 256)
        np.testing.assert_array_equal(y.numpy(), ey)
        np.testing.assert_array_equal(cr.numpy(), ecr)


def test_undecodable_bytes_raise_a_clear_error(original_path):
    with pytest.raises(DecodeError, match="could not decode the 12-byte H.265 picture"):
        decode_annexb(b"\x00\x00\x00\x01garbage!")
    ds = tf.data.Dataset.from_tensors(b"\x00\x00\x00\x01garbage!").map(decode)
    with pytest.raises(tf.errors.OpError, match="could not decode the 12-byte"):
        list(ds)
    # The thread decodes again afterwards (a failed decoder is replaced).
    good = next(iter(BznaDataset(original_path, [11])))["data"].numpy()
    assert decode_annexb(good)[0].shape == (512, 512)
