"""The GPU path: the GPU library's build and DecodeWarp (everywhere), NVDEC + CUDA (on a GPU).

Without an NVIDIA GPU, the tests that need one are skipped with the reason
(``bzna_tf.ops.gpu_error()``); the build and load tests run everywhere: they
need nvcc (the pinned pip wheels of the ``test`` extra) and nv-codec-headers
(installed, or fetched here with ``apt-get download``).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bzna_tf
from bzna_tf.ops import _build, _load

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


@pytest.fixture(scope="session")
def gpu_library(ffnvcodec):
    given = _load._given_gpu_libraries()
    if given is not None and (given.core.parent / "build.json").is_file():
        yield given  # bzna_tf's own build, made elsewhere: tools/tf_carry takes it to a GPU machine
        return
    if _build.nvcc() is None:
        pytest.skip("no nvcc: pip install 'bzna-tf[gpu-build]' (.ci/gpu-build runs these tests)")
    old = os.environ.get("BZNA_TF_FFNVCODEC_INCLUDE")
    os.environ["BZNA_TF_FFNVCODEC_INCLUDE"] = ffnvcodec
    try:
        yield _build.build_gpu()
    finally:
        if old is None:
            os.environ.pop("BZNA_TF_FFNVCODEC_INCLUDE", None)
        else:
            os.environ["BZNA_TF_FFNVCODEC_INCLUDE"] = old


def _needed(library):
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_gpu_libraries_build_link_no_cuda_and_load(gpu_library):
    """Kernels compiled to cubins for each architecture family plus PTX; nothing of CUDA linked."""
    import json

    info = json.loads((Path(gpu_library.core).parent / "build.json").read_text())
    assert {"sm_75", "sm_90"} <= set(info["archs"]) and "compute_75 (PTX)" in info["archs"], info
    # The pinned CUDA 12 ptxas beside a CUDA 13 nvcc: PTX declared at CUDA 12.0's ISA (drivers >= 525).
    if info["ptxas_release"].startswith("12.") and info["nvcc_release"].startswith("13."):
        assert info["ptx_isa"] == "8.0"
    core = _needed(gpu_library.core)
    banned = ("cuda", "cuvid", "nvidia", "tensorflow", "absl")
    assert core and not [x for x in core if any(k in x for k in banned)], core
    for lib in (gpu_library.warp, gpu_library.nvdec):
        needed = _needed(lib)
        assert "libbzna_tf_gpu_core.so" in needed, needed
        assert not [x for x in needed if "cuda" in x or "cuvid" in x or "nvidia" in x], needed
    assert b"bzna_warp_yuv" in Path(gpu_library.core).read_bytes()  # the embedded PTX
    bzna_tf.ops.load_library()
    from tensorflow.python.framework import kernels

    tf.load_library(str(gpu_library.warp))
    for op in ("BznaWarpYuv420", "BznaWarpRgb"):
        devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
        assert devices == {"CPU", "GPU"}, (op, devices)
    tf.load_library(str(gpu_library.nvdec))
    for op in ("BznaDecodeWarp", "BznaDecodeWarpDataset"):
        devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
        assert devices == {"CPU", "GPU"}, (op, devices)
    # The dataset's GPU kernel counts skipped samples through the ops library (connected by _load).
    nm = ["nm", "-D", "--defined-only", str(gpu_library.nvdec)]
    exported = subprocess.run(nm, capture_output=True, text=True)
    assert "bzna_tf_gpu_set_skip_reporter" in exported.stdout


def test_gpu_kernels_are_registered_only_where_they_can_run(gpu_library, ffnvcodec):
    """Without a driver the probe says so and load_gpu_library() registers no GPU kernel (CPU fallback)."""
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    code = (
        "import os; os.environ['BZNA_TF_GPU'] = '1'\n"
        "import bzna_tf.ops as ops, tensorflow as tf\n"
        "from tensorflow.python.framework import kernels\n"
        "ops.load_library()\n"
        "print(ops.gpu_error())\n"
        "for op in ('BznaDecodeWarp', 'BznaWarpRgb'):\n"
        "    print(op, sorted({k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}))\n"
    )
    env = dict(os.environ, BZNA_TF_FFNVCODEC_INCLUDE=ffnvcodec)  # the cached build of the fixture
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert "libcuda.so.1" in lines[-3], lines
    assert lines[-2:] == ["BznaDecodeWarp ['CPU']", "BznaWarpRgb ['CPU']"], lines


def test_gpu_probe_explains_a_missing_driver(gpu_library):
    from bzna_tf.ops.gpu_core import HAS_CUDA, HAS_NVDEC, GpuCore

    bits, message = GpuCore(gpu_library.core).probe()
    if tf.config.list_physical_devices("GPU"):
        assert bits & HAS_CUDA and (bits & HAS_NVDEC or "libnvcuvid" in message)
    else:
        assert bits == 0 and ("libcuda.so.1" in message or "cuInit" in message), message


def test_gpu_queue_checks_arguments_without_a_gpu(gpu_library):
    """ABI 4's queue: every argument check answers INVALID_ARGUMENT, naming what is wrong, before the
    driver is touched; creating a queue without a driver says why it cannot."""
    import ctypes

    from bzna_tf.ops.gpu_core import (
        INVALID_ARGUMENT,
        OK,
        UNAVAILABLE,
        GpuCore,
        GpuInvalidArgumentError,
        GpuUnavailableError,
        warp_params,
    )

    core = GpuCore(gpu_library.core)
    lib = core.lib
    for depth in (0, 65, -1):
        with pytest.raises(
            GpuInvalidArgumentError, match=rf"queue_create: .*depth in \[1, 64\]\. Received {depth}"
        ):
            core.queue(depth)
    assert lib.bzna_gpu_queue_create(0, 2, None) == INVALID_ARGUMENT
    assert "a place for the queue" in core.last_error()
    assert lib.bzna_gpu_queue_destroy(None) == OK  # NULL: a no-op
    if not tf.config.list_physical_devices("GPU"):
        handle = ctypes.c_void_p()
        assert lib.bzna_gpu_queue_create(0, 2, ctypes.byref(handle)) == UNAVAILABLE and handle.value is None
        with pytest.raises(GpuUnavailableError, match="libcuda.so.1|cuInit"):
            core.queue(2)

    pictures = [b"\x00\x00\x00\x01\x40\x01", b"\x00\x00\x00\x01\x42\x01"]  # never decoded
    ptrs = (ctypes.c_char_p * 2)(*pictures)
    sizes = (ctypes.c_uint64 * 2)(6, 6)
    empty = (ctypes.c_uint64 * 2)(6, 0)
    m = np.eye(3, dtype=np.float32)
    three = np.stack([m] * 3)
    hw = np.array([[4, 4], [0, 4]], np.int32)
    params, flat = warp_params((4, 5)), warp_params((0, 5))
    ticket = ctypes.c_int64(-7)
    byref = ctypes.byref

    def submit(queue=None, sz=sizes, mats=m, count=1, hw_ptr=None, p=params, flags=0, t=byref(ticket)):
        return lib.bzna_gpu_submit(queue, ptrs, sz, 2, mats.ctypes.data, count, hw_ptr, byref(p), flags, t)

    checks = [
        ("expected a queue", lambda: submit()),
        ("sample 1 of the batch: expected an H.265 picture. Received 0 bytes", lambda: submit(sz=empty)),
        # With SKIP_BAD a picture of 0 bytes (one that reading failed, named by reading's error) becomes
        # that sample's failure: it failed the whole batch under on_error="skip". Past the picture checks,
        # the next one answers.
        ("expected a queue", lambda: submit(sz=empty, flags=1)),
        ("matrix_count 1 or 2", lambda: submit(mats=three, count=3)),
        (r"sample 1 of the batch: expected a picture size", lambda: submit(hw_ptr=hw.ctypes.data)),
        ("output height", lambda: submit(p=flat)),
        ("flags 0 or BZNA_GPU_SKIP_BAD", lambda: submit(flags=2)),
        ("a place for the ticket", lambda: submit(t=None)),
        ("Received neither", lambda: lib.bzna_gpu_collect(None, 0, None, None, None, None)),
        (
            "expected a queue",
            lambda: lib.bzna_gpu_collect(None, 0, None, None, byref(ctypes.c_void_p()), None),
        ),
        ("expected a queue", lambda: lib.bzna_gpu_release(None, 0, None)),
        (
            "sample index",
            lambda: lib.bzna_gpu_ticket_failure(None, 0, 0, None, ctypes.create_string_buffer(8), 8),
        ),
        ("message buffer", lambda: lib.bzna_gpu_ticket_failure(None, 0, 0, byref(ctypes.c_int64()), None, 8)),
    ]
    for fragment, call in checks:
        assert call() == INVALID_ARGUMENT, fragment
        assert re.search(fragment, core.last_error()), (fragment, core.last_error())
    assert ticket.value == -7  # no ticket was taken


def test_missing_toolchain_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("BZNA_TF_FFNVCODEC_INCLUDE", str(tmp_path))
    monkeypatch.setattr(_build, "ffnvcodec_include", lambda: None)
    with pytest.raises(_build.BuildError, match="nv-codec-headers"):
        _build.plan_gpu()
    monkeypatch.setattr(_build, "nvcc", lambda: None)
    assert "nvcc" in _build.gpu_toolchain_error() and "libffmpeg-nvenc-dev" in _build.gpu_toolchain_error()


# ------------------------------------------------------------------------------------ DecodeWarp, anywhere


def payload_inputs():
    """A model's inputs for as_dataset(device="model")'s payloads."""
    return {
        "data": keras.Input((), dtype="string", name="data"),
        "matrices": keras.Input((3, 3), name="matrices"),
        "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes"),
    }


def decode_model(height, width, **kwargs):
    inputs = payload_inputs()
    return keras.Model(inputs, bzna_tf.layers.DecodeWarp(height, width, **kwargs)(inputs))


def test_decode_warp_layer_equals_the_cpu_path(original_path):
    d = bzna_tf.ClassificationDataset(original_path).labelled()  # 9 of 12
    warp = bzna_tf.layers.RandomResizedCrop(24, 40, flip_h=0.5)
    norm = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    images = d.as_dataset(
        batch_size=5, warp=warp, seed=3, fill_value=9.0, normalize=(norm["mean"], norm["std"])
    )
    payloads = d.as_dataset(batch_size=5, warp=warp, seed=3, device="model")
    spec = payloads.element_spec[0]
    assert spec["data"].dtype == tf.string and spec["matrices"].shape.as_list() == [None, 3, 3]
    assert spec["picture_sizes"].dtype == tf.int32 and spec["picture_sizes"].shape.as_list() == [None, 2]
    model = decode_model(24, 40, fill_value=9.0, **norm)
    batches = 0
    for (x, y), (p, q) in zip(images, payloads, strict=True):
        out = model(p)
        if "GPU" in out.device:  # NVDEC + the CUDA warp: within one grey level, as the op's own test
            np.testing.assert_allclose(out.numpy(), x.numpy(), atol=1.0 / (255 * 0.224) + 1e-5)
        else:
            np.testing.assert_array_equal(out.numpy(), x.numpy())
        np.testing.assert_array_equal(y.numpy(), q.numpy())
        batches += 1
    assert batches == 2
    nchw = decode_model(24, 40, data_format="channels_first")(next(iter(payloads))[0])
    assert nchw.shape == (5, 3, 24, 40)


def test_decode_warp_layer_trains_and_saves(original_path, tmp_path):
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(9))
    ds = d.as_dataset(batch_size=3, warp=bzna_tf.layers.RandomResizedCrop(16, 16), seed=1, device="model")
    inputs = payload_inputs()
    x = bzna_tf.layers.DecodeWarp(16, 16, mean=0.5, std=0.25)(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"]).all()
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    batch = next(iter(ds))[0]
    np.testing.assert_array_equal(again(batch).numpy(), model(batch).numpy())


def test_gpu_datasets_leave_the_images_to_the_layer(original_path):
    d = bzna_tf.ClassificationDataset(original_path).labelled()
    warp = bzna_tf.layers.CenterResizedCrop(8, 8)
    with pytest.raises(ValueError, match=r"DecodeWarp: give it the normalisation \(its mean= and std="):
        d.as_dataset(batch_size=2, warp=warp, device="model", normalize=(0.5, 0.2))
    with pytest.raises(ValueError, match=r"the layout \(its data_format='channels_first'\)"):
        d.as_dataset(batch_size=2, warp=warp, device="model", data_format="channels_first")
    with pytest.raises(ValueError, match="Expected a dict"):
        bzna_tf.layers.DecodeWarp(8, 8)(tf.zeros([1, 8, 8, 3]))
    # "auto" keeps images in tf.data.
    assert d.as_dataset(batch_size=2, warp=warp).element_spec[0].dtype == tf.float32


# ------------------------------------------------------------------------------------ on an NVIDIA GPU


def _need_gpu():
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("no GPU visible to TensorFlow (the NVDEC + CUDA path needs an NVIDIA GPU and driver)")
    bzna_tf.ops.load_library()
    reason = bzna_tf.ops.gpu_error()
    if reason:
        pytest.skip(f"bzna_tf's GPU kernels are unavailable: {reason}")


def _payloads(original_path, size=(96, 128), track="thumb"):
    with bzna_tf.BznaFile(original_path) as f:
        data = [getattr(f.sample(i), track).annexb() for i in range(len(f))]
        sizes = [getattr(f.sample(i), track).size for i in range(len(f))]
    warp = bzna_tf.transforms.RandomResizedCrop(degrees=10, flip_h=0.5)
    hw = np.array([[h, w] for w, h in sizes], np.int32)
    return data, warp.matrices(hw, size, seed=5, indices=np.arange(len(data))), hw


@pytest.mark.parametrize("sized", [False, True])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("track", ["thumb", "input"])
def test_gpu_decode_warp_matches_the_cpu_op(original_path, track, antialias, sized):
    _need_gpu()
    data, m, hw = _payloads(original_path, track=track)
    # A zoom-out on every other sample: beyond the picture (inside its padded frame when sized).
    m[::2] = m[::2] @ np.array([[1.7, 0, -30], [0, 1.7, -20], [0, 0, 1]], np.float32)
    kwargs = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), antialias=antialias, oob_color=7)
    if sized:
        kwargs["picture_sizes"] = hw
    with tf.device("/CPU:0"):
        cpu = bzna_tf.ops.decode_warp(data, m, (96, 128), **kwargs).numpy()
    with tf.device("/GPU:0"):
        gpu_out = bzna_tf.ops.decode_warp(data, m, (96, 128), **kwargs)
    assert "GPU" in gpu_out.device
    # One grey level, in normalised units: 1 / (255 * std).
    np.testing.assert_allclose(gpu_out.numpy(), cpu, atol=1.0 / (255 * 0.224) + 1e-5)


def test_gpu_decode_warp_picture_sizes_errors_name_and_skip_the_sample(original_path):
    _need_gpu()
    data, m, hw = _payloads(original_path)
    hw[2] = [hw[2][0], 513]  # wider than its 512 x 512 frame
    hw[5] = [0, hw[5][1]]
    names = [f"f.bzna, sample {i}" for i in range(len(data))]
    kwargs = dict(names=names, picture_sizes=hw, oob_color=(-1, -2, -3))
    with (
        tf.device("/GPU:0"),
        pytest.raises(tf.errors.InvalidArgumentError, match=r"f\.bzna, sample 2: .*Received \[\d+, 513\]"),
    ):
        bzna_tf.ops.decode_warp(data, m, (32, 48), **kwargs)
    with tf.device("/CPU:0"):
        cpu, cpu_errors = bzna_tf.ops.decode_warp(data, m, (32, 48), on_error="skip", **kwargs)
    with tf.device("/GPU:0"):
        gpu_out, gpu_errors = bzna_tf.ops.decode_warp(data, m, (32, 48), on_error="skip", **kwargs)
    bad = [i for i, e in enumerate(gpu_errors.numpy()) if e]
    assert bad == [2, 5] == [i for i, e in enumerate(cpu_errors.numpy()) if e]
    assert b"picture size" in gpu_errors.numpy()[2] and b"picture size" in gpu_errors.numpy()[5]
    np.testing.assert_allclose(gpu_out.numpy(), cpu.numpy(), atol=1.0 + 1e-5)
    np.testing.assert_array_equal(gpu_out.numpy()[5], np.broadcast_to(np.float32([-1, -2, -3]), (32, 48, 3)))


def test_gpu_decode_warp_skips_pictures_nvdec_refuses_named_as_on_the_cpu(original_path):
    # Damaged H.265 data (its slices cut short, or overwritten past the parameter sets): whatever NVDEC's
    # parser, decoder or decode status says of it is the picture's error, InvalidArgument, so "skip"
    # skips it; an internal error (a driver failure) would fail the op. Each reason is named by the
    # picture's name alone (no "sample 0 of the batch" from the one-picture retry).
    _need_gpu()
    data, m, _ = _payloads(original_path)
    data[1] = data[1][: len(data[1]) // 2]
    tail = len(data[4]) // 3
    data[4] = data[4][:tail] + bytes(np.random.default_rng(0).integers(0, 256, len(data[4]) - tail, np.uint8))
    names = [f"f.bzna, sample {i}" for i in range(len(data))]
    kwargs = dict(names=names, oob_color=(-1, -2, -3))
    with tf.device("/GPU:0"):
        out, errors = bzna_tf.ops.decode_warp(data, m, (32, 48), on_error="skip", **kwargs)
    errors = [e.decode() for e in errors.numpy()]
    bad = [i for i, e in enumerate(errors) if e]
    assert set(bad) <= {1, 4}, errors
    if not bad:
        pytest.skip("NVDEC decoded both damaged pictures without an error: nothing to skip was tested")
    for i in bad:
        assert errors[i].startswith(f"f.bzna, sample {i}: ") and "of the batch" not in errors[i], errors[i]
        np.testing.assert_array_equal(out.numpy()[i], np.broadcast_to(np.float32([-1, -2, -3]), (32, 48, 3)))
    with (
        tf.device("/GPU:0"),
        pytest.raises(tf.errors.InvalidArgumentError, match=f"f\\.bzna, sample {bad[0]}: "),
    ):
        bzna_tf.ops.decode_warp(data, m, (32, 48), **kwargs)


@pytest.mark.parametrize("antialias", [False, True])
def test_gpu_warps_match_the_cpu_ops(antialias):
    _need_gpu()
    rng = np.random.default_rng(0)
    y = rng.integers(0, 256, (3, 61, 75), dtype=np.uint8)
    cb, cr = (rng.integers(0, 256, (3, 31, 38), dtype=np.uint8) for _ in range(2))
    rgb = rng.integers(0, 256, (3, 61, 75, 3), dtype=np.uint8)
    m = bzna_tf.transforms.RandomResizedCrop(degrees=30).matrices([[61, 75]] * 3, (40, 50), seed=1)
    for fn, args in ((bzna_tf.ops.warp_yuv420, (y, cb, cr)), (bzna_tf.ops.warp_rgb, (rgb,))):
        for cast in (None, np.float32) if fn is bzna_tf.ops.warp_rgb else (None,):
            inputs = tuple(a.astype(cast) for a in args) if cast else args
            with tf.device("/CPU:0"):
                cpu = fn(*inputs, m, (40, 50), data_format="NCHW", antialias=antialias).numpy()
            with tf.device("/GPU:0"):
                gpu_out = fn(*inputs, m, (40, 50), data_format="NCHW", antialias=antialias).numpy()
            # The same float32 operations in the same order (nvcc --fmad=false): equal but for
            # a rounding case of the division on the GPU.
            assert np.mean(gpu_out == cpu) > 0.999 and np.abs(gpu_out - cpu).max() <= 1.0


def test_nvdec_pictures_equal_ffmpeg_decodes(original_path, tmp_path):
    """An independent NVDEC decoder (NVIDIA's PyNvVideoCodec) against FFmpeg's, on the same picture.

    The per-image mp4 of a sample is a whole mp4 file: PyNvVideoCodec's
    SimpleDecoder reads its first video track (the full-size picture).
    """
    _need_gpu()
    try:
        import PyNvVideoCodec as nvc
    except (ImportError, RuntimeError) as e:  # RuntimeError: no driver
        pytest.skip(f"PyNvVideoCodec unavailable: {e}")
    from bzna_tf.decode import decode_annexb

    with bzna_tf.BznaFile(original_path) as f:
        (tmp_path / "sample.mp4").write_bytes(f.sample_bytes(0))
        y, cb, cr = decode_annexb(f.sample(0).input.annexb())
    decoder = nvc.SimpleDecoder(
        str(tmp_path / "sample.mp4"),
        gpu_id=0,
        use_device_memory=False,
        output_color_type=nvc.OutputColorType.NATIVE,
    )
    nv12 = np.asarray(np.from_dlpack(decoder[0])).reshape(-1)
    h, w = y.shape
    np.testing.assert_array_equal(nv12[: h * w].reshape(h, w), y)
    uv = nv12[h * w : h * w + h * w // 2].reshape(h // 2, w // 2, 2)
    np.testing.assert_array_equal(uv[..., 0], cb)
    np.testing.assert_array_equal(uv[..., 1], cr)


def test_model_fit_decodes_on_the_gpu(original_path):
    _need_gpu()
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(9))
    ds = d.as_dataset(batch_size=3, warp=bzna_tf.layers.RandomResizedCrop(32, 32), seed=1, device="model")
    model = decode_model(32, 32, mean=0.5, std=0.25)
    x = model(next(iter(ds))[0])
    assert "GPU" in x.device


# ------------------------------------------------------------------ as_dataset(device="gpu"): decoded ahead


def test_gpu_dataset_elements_are_on_the_gpu_and_equal_the_cpu_paths(original_path):
    _need_gpu()
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(9))
    kw = dict(batch_size=3, warp=bzna_tf.layers.RandomResizedCrop(32, 32, flip_h=0.5), seed=1, shuffle=True,
              normalize=((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)))  # fmt: skip
    ahead = d.as_dataset(**kw, device="gpu")
    assert type(ahead).__name__ == "_DecodeWarpDataset", "device='gpu' fell back to the CPU on a GPU machine"
    cpu = list(d.as_dataset(**kw, device="cpu"))
    got = list(ahead)
    assert len(got) == len(cpu) == 3
    for (x, y), (u, v) in zip(got, cpu, strict=True):
        assert "GPU" in x.device and "GPU" in y.device, (x.device, y.device)
        np.testing.assert_allclose(x.numpy(), u.numpy(), atol=1.0 / (255 * 0.2) + 1e-5)  # one grey level
        np.testing.assert_array_equal(y.numpy(), v.numpy())


def test_gpu_dataset_skips_as_the_cpu_path(original_path):
    _need_gpu()
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(6))
    kw = dict(batch_size=3, shape=16, on_error="skip", with_filenames=True)
    ahead = d.as_dataset(**kw, device="gpu")
    got = [(x.shape[0], n.numpy().tolist()) for x, _, n in ahead]
    assert got == [(x.shape[0], n.numpy().tolist()) for x, _, n in d.as_dataset(**kw)]
    assert ahead.bzna_skipped.count == 0


# TensorFlow's SerializeIterator and DeserializeIterator have CPU kernels only, and eager places them
# with the iterator's resource: saving a GPU-placed iterator fails ("Cannot assign a device for operation
# SerializeIterator ... no supported kernel for GPU devices"). Open upstream; the test follows it.
TF_GPU_ITERATOR_SAVE_ISSUE = "https://github.com/tensorflow/tensorflow/issues/62959"


@pytest.mark.parametrize("symbolic", [False, True], ids=["explicit", "symbolic"])
def test_gpu_dataset_iterator_checkpoints_restore_the_continuation(original_path, tmp_path, symbolic):
    # A GPU-placed iterator saved with batches decoding ahead (explicit: their inputs are saved and
    # decoded again; symbolic: the inputs' positions only), restored into the same pipeline after its
    # epoch counter moved on: the rest of the saved iteration, as an uninterrupted run yields it. Where
    # TensorFlow cannot save a GPU iterator at all (the issue above), the failure must be that one: an
    # expected failure, not a pass; any other error fails the test.
    _need_gpu()
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(9))
    ds = d.as_dataset(batch_size=2, shape=24, shuffle=True, seed=4, repeat=2, prefetch=3, device="gpu")
    assert type(ds).__name__ == "_DecodeWarpDataset"
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic
    ds = ds.with_options(options)
    it = iter(ds)
    next(it)
    next(it)
    try:
        path = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "it"))
    except tf.errors.OpError as e:
        # TensorFlow names the op in every error it raises (a stateful input's too): the refusal is
        # the one that finds no GPU kernel for it, or the iterator on another device.
        limitation = isinstance(e, (tf.errors.InvalidArgumentError, tf.errors.NotFoundError)) and re.search(
            r"no supported kernel for GPU devices|Could not find device for node|"
            r"All kernels registered for op (Serialize|Deserialize)Iterator|"
            r"located in device .*GPU.* from device .*CPU",
            e.message,
        )
        if not (limitation and re.search(r"(Serialize|Deserialize)Iterator", e.message)):
            raise
        pytest.xfail(
            f"TensorFlow cannot save a GPU-placed iterator ({TF_GPU_ITERATOR_SAVE_ISSUE}): "
            f"{type(e).__name__}: {e.message.splitlines()[0][:300]}"
        )
    rest = [(x.numpy(), y.numpy()) for x, y in it]
    again = iter(ds)
    tf.train.Checkpoint(iterator=again).read(path).assert_consumed()
    got = [(x.numpy(), y.numpy()) for x, y in again]
    assert len(got) == len(rest) == 7  # 18 samples by 2, less the 2 batches read before the save
    for (x, y), (u, v) in zip(got, rest, strict=True):
        np.testing.assert_array_equal(x, u)
        np.testing.assert_array_equal(y, v)


def test_gpu_dataset_trains_an_unchanged_model(original_path):
    _need_gpu()
    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(9))
    ds = d.as_dataset(batch_size=3, warp=bzna_tf.layers.RandomResizedCrop(32, 32), seed=1, device="gpu")
    assert type(ds).__name__ == "_DecodeWarpDataset"
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(4),
        ]
    )
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
