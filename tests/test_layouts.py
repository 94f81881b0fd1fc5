"""The two per-image layouts: "benzina" (SPEC section 2) and "compact" (docs/guides/converting.md, "Layouts").

Three images at a near-lossless setting (x265 ultrafast, CRF 4): 60 x 40 (no
thumbnail), 200 x 130 (no thumbnail) and 700 x 300 (a 512 x 219 thumbnail),
written once per layout. Compact frames: each side rounded up to 64, at least
144 (NVDEC's smallest H.265 frame).
"""

import struct

import numpy as np
import pytest
import tensorflow as tf
from conftest import gradient

from bzna_tf.convert.encode import (
    compact_coded_size,
    encode_image,
    encode_image_with,
    encode_picture,
    layout_coded_size,
)
from bzna_tf.decode import decode_annexb
from bzna_tf.format import BznaFile, BznaWriter, Picture
from bzna_tf.format.hevc import NAL_PPS, NAL_PREFIX_SEI, NAL_SPS, NAL_VPS
from bzna_tf.ops import BznaDataset, decode_warp
from bzna_tf.transforms import compute_affine_matrix

SIZES = [(60, 40), (200, 130), (700, 300)]  # (width, height)
# (input frame, thumbnail size, thumbnail frame) per layout, as documented.
FRAMES = {
    "benzina": [((512, 512), (60, 40), (512, 512)), ((512, 512), (200, 130), (512, 512)),
                ((1024, 512), (512, 219), (512, 512))],
    "compact": [((144, 144), (60, 40), (144, 144)), ((256, 192), (200, 130), (256, 192)),
                ((704, 320), (512, 219), (512, 256))],
}  # fmt: skip


def _image(w, h, seed):
    """A gradient with a little texture, so that the codec has something to code."""
    rng = np.random.default_rng(seed)
    img = gradient(h, w, seed).astype(np.int16) + rng.integers(-12, 13, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    images = [_image(w, h, i) for i, (w, h) in enumerate(SIZES)]
    out = {}
    for layout in ("benzina", "compact"):
        path = tmp_path_factory.mktemp("layouts") / f"{layout}.bzna"
        with BznaWriter(path) as w:
            for i, img in enumerate(images):
                inp, thumb = encode_image(img, preset="ultrafast", crf=4, threads=1, layout=layout)
                w.append(inp, thumb=thumb, target=10 + i, filename=f"{i}.png")
        out[layout] = str(path)
    return out


def test_coded_frame_sizes():
    assert compact_coded_size((32, 32)) == (144, 144)
    assert compact_coded_size((145, 64)) == (192, 144)
    assert compact_coded_size((500, 375)) == (512, 384)
    assert compact_coded_size((500, 375), block=8) == (504, 376)
    assert layout_coded_size((600, 535), "compact") == (640, 576)
    assert layout_coded_size((600, 535)) == (1024, 1024)
    assert layout_coded_size((512, 219), thumbnail=True) == (512, 512)
    assert layout_coded_size((512, 219), "compact", thumbnail=True) == (512, 256)
    with pytest.raises(ValueError, match="layout must be one of .* Received: layout='tight'"):
        layout_coded_size((10, 10), "tight")
    with pytest.raises(ValueError, match="Received: layout='tight'"):
        encode_image(np.zeros((8, 8, 3), np.uint8), layout="tight")
    with pytest.raises(ValueError, match="Received: layout='tight'"):
        Picture(b"\0", b"", (8, 8), (8, 8), layout="tight")


def test_both_layouts_read_back_through_the_python_reader(files):
    with BznaFile(files["benzina"]) as b, BznaFile(files["compact"]) as c:
        assert c.targets.tolist() == b.targets.tolist() == [10, 11, 12]
        assert c.filenames() == b.filenames() == ["0.png", "1.png", "2.png"]
        for i, (w, h) in enumerate(SIZES):
            for layout, f in (("benzina", b), ("compact", c)):
                s = f.sample(i)
                frame, thumb_size, thumb_frame = FRAMES[layout][i]
                assert s.input.size == (w, h) and s.input.coded_size == frame
                assert s.thumb.size == thumb_size and s.thumb.coded_size == thumb_frame
                assert s.has_separate_thumb == (i == 2)
            old, new = b.sample(i), c.sample(i)
            # The benzina layout keeps the original tools' boxes; compact drops the copies.
            assert old.track_order == ["bzna_input", "bzna_fname", "bzna_target", "bzna_thumb"]
            assert new.track_order == ["bzna_input", "bzna_thumb"] if i == 2 else ["bzna_input"]
            assert (old.target, old.filename) == (10 + i, f"{i}.png")
            assert (new.target, new.filename) == (None, None)
            params = [NAL_VPS, NAL_SPS, NAL_PPS]
            assert [a.nal_unit_type for a in old.input.hvcc.arrays] == [*params, NAL_PREFIX_SEI]
            assert [a.nal_unit_type for a in new.input.hvcc.arrays] == params
            assert new.input.children == ["hvcC", "pasp", "clap"]
            assert len(c.sample_bytes(i)) < len(b.sample_bytes(i)) - 4000
            # Decoded frames have the documented coded sizes.
            for track in (new.input, new.thumb):
                y, cb, _ = decode_annexb(track.annexb())
                assert (y.shape[1], y.shape[0]) == track.coded_size
                assert cb.shape == (y.shape[0] // 2, y.shape[1] // 2)


@pytest.mark.parametrize("track", ["thumb", "input"])
def test_the_source_op_reads_compact_files(files, track):
    got = list(BznaDataset(files["compact"], track=track, with_filenames=True))
    with BznaFile(files["compact"]) as f:
        assert len(got) == len(f)
        for i, e in enumerate(got):
            pic = getattr(f.sample(i), track)
            assert e["data"].numpy() == pic.annexb()
            assert (int(e["width"]), int(e["height"])) == pic.size
            assert int(e["target"]) == 10 + i and e["filename"].numpy() == f"{i}.png".encode()


@pytest.mark.parametrize("track", ["thumb", "input"])
def test_decode_warp_gives_the_same_pixels_in_both_layouts(files, track):
    """Inside the image both layouts give the same picture, up to the codec's near-lossless error."""
    outs = {}
    for layout, path in files.items():
        outs[layout] = []
        for e in BznaDataset(path, track=track):
            w, h = int(e["width"]), int(e["height"])
            m = compute_affine_matrix((h, w), (h // 2, w // 2), resize=True)  # every source point inside
            outs[layout].append(decode_warp(e["data"], m, (h // 2, w // 2)).numpy())
    for old, new in zip(outs["benzina"], outs["compact"], strict=True):
        assert old.shape == new.shape
        assert np.mean((old - new) ** 2) < 255**2 / 1e4  # PSNR above 40 dB


def test_out_of_bounds_follows_each_coded_frame(files):
    """SPEC section 4 bounds the warp by the coded frame: the compact padding band is narrower."""
    probe = tf.constant([[1, 0, 200], [0, 1, 10], [0, 0, 1]], tf.float32)  # output (0, 0) <- source (200, 10)
    got = {}
    for layout, path in files.items():
        data = next(iter(BznaDataset(path, [0])))["data"]  # 60 x 40: benzina 512 x 512, compact 144 x 144
        got[layout] = decode_warp(data, probe, (1, 1), oob_color=(1, 2, 3)).numpy()[0, 0]
    np.testing.assert_array_equal(got["compact"], [1, 2, 3])  # past 143: out of bounds
    assert not np.array_equal(got["benzina"], [1, 2, 3])  # inside 512: the padding's edge smear


def test_other_encoders_get_compact_frames_and_boxes():
    """encode_image_with makes any encoder's pictures compact (NVENC goes this way)."""
    calls = []

    def encoder(image, coded_size=None):
        calls.append(coded_size)
        return encode_picture(image, coded_size=coded_size, preset="ultrafast", threads=1)  # x265 info SEI on

    inp, thumb = encode_image_with(encoder, _image(70, 600, 5), layout="compact")
    assert calls == [(144, 640), (144, 512)]  # input 70 x 600, thumbnail 59 x 512
    for p in (inp, thumb):
        assert p.layout == "compact"
        assert [a.nal_unit_type for a in p.hvcc.arrays] == [NAL_VPS, NAL_SPS, NAL_PPS]


def test_the_benzina_layout_is_the_default_and_unchanged():
    img = _image(90, 60, 7)
    default = encode_picture(img, preset="ultrafast", threads=1)
    explicit = encode_picture(img, preset="ultrafast", threads=1, layout="benzina")
    assert default.layout == explicit.layout == "benzina" and default.coded_size == (512, 512)
    assert default.sample == explicit.sample and default.hvcc_bytes == explicit.hvcc_bytes
    assert NAL_PREFIX_SEI in [a.nal_unit_type for a in default.hvcc.arrays]


@pytest.mark.parametrize("layout", ["benzina", "compact"])
def test_a_standard_reader_decodes_the_outer_thumbnail_track(files, layout):
    # The outer bzna_thumb track is an hvc1 video track, which FFmpeg plays. It had one sample entry,
    # sample 0's: the compact layout's thumbnails of other frames were decoded with another picture's
    # parameter sets (garbage; "cu_qp_delta -44 is outside the valid range" under -err_detect explode).
    # Now one entry per coded frame, each sample mapped to its own by stsc.
    own, outer = _thumbnails_both_ways(files[layout])
    assert outer == own
    with BznaFile(files[layout]) as f:
        stsd = f.tracks["bzna_thumb"].box
        for name in ("mdia", "minf", "stbl", "stsd"):
            stsd = next(k for k in stsd.children() if k.type == name)
        entries = [(e.type, *struct.unpack_from(">HH", e.payload(), 24)) for e in stsd.children(8)]
    frames = [frame for _, _, frame in FRAMES[layout]]
    assert [(w, h) for w, h, _ in own] == frames
    assert entries == [("hvc1", *frame) for frame in dict.fromkeys(frames)]  # benzina: one, as the original


def test_compact_thumbnails_of_one_frame_and_two_settings_get_an_entry_each(tmp_path):
    # Keyed by the frame alone, a thumbnail coded by another setting (another run, encoder or crf,
    # repacked into one file) shared the first one's entry: FFmpeg dropped it or decoded garbage.
    path = tmp_path / "mixed.bzna"
    with BznaWriter(path) as w:
        for i, (preset, crf) in enumerate([("ultrafast", 4), ("medium", 40), ("ultrafast", 4)]):
            inp, thumb = encode_image(_image(100, 90, i), preset=preset, crf=crf, threads=1, layout="compact")
            w.append(inp, thumb=thumb, target=i, filename=f"{i}.png")
    with BznaFile(path) as f:
        assert f.sample(0).thumb.hvcc.parameter_sets != f.sample(1).thumb.hvcc.parameter_sets
    own, outer = _thumbnails_both_ways(path)
    assert outer == own


def _thumbnails_both_ways(path):
    """(each thumbnail decoded alone with its own parameter sets, as bzna_tf's readers do; the outer
    bzna_thumb track decoded by PyAV, as a player reads it): (width, height, YUV 4:2:0 planes) each."""
    av = pytest.importorskip("av")
    with BznaFile(path) as f:
        own = []
        for i in range(len(f)):
            y, cb, cr = decode_annexb(f.sample(i).thumb.annexb())
            planes = np.concatenate([y.ravel(), cb.ravel(), cr.ravel()])
            own.append((y.shape[1], y.shape[0], planes.tobytes()))
    with av.open(str(path)) as container:
        frames = container.decode(container.streams.video[0])
        outer = [(fr.width, fr.height, fr.to_ndarray(format="yuv420p").tobytes()) for fr in frames]
    return own, outer
