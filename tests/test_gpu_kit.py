"""The GPU kit and the GPU core's ctypes binding, on a machine without a GPU.

The kit is built once (a small benchmark set: the full one only changes its
size), its ``run.sh`` run once (it compiles the core with nvcc, then reports
the missing driver), and the binding tested on the library that run built:
argument checks answer before the driver is touched. The runner's checks and
benchmark run end to end against a stand-in core (tests/_fake_gpu_core.py:
FFmpeg + a NumPy warp from SPEC section 4), so the first GPU to see the kit does not
meet untried code. Those whole runs of the runner (5 to 25 s each) are marked slow: the README's test
command leaves them out, ``.ci/slow`` runs them.

The kit is tooling, not runtime: it lives in ``tools/gpu_kit/`` (run as
``python tools/gpu_kit OUT``), and neither ``bzna_tf/`` nor its wheel holds it.
"""

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _warp_reference import ref_points
from conftest import checkout_ignore

from bzna_tf.convert import DEFAULT_QUALITY, QUALITY_PRESETS
from bzna_tf.ops import _build
from bzna_tf.ops.gpu_core import (
    ABI_VERSION,
    CANCELLED,
    HAS_CUDA,
    INVALID_ARGUMENT,
    UNAVAILABLE,
    GpuCancelledError,
    GpuCore,
    GpuCoreError,
    GpuInvalidArgumentError,
    GpuUnavailableError,
    warp_params,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KIT_TOOL = ROOT / "tools" / "gpu_kit"
sys.path.insert(0, str(KIT_TOOL))
import kit_bench  # noqa: E402  (tools/gpu_kit is no package: its folder goes on the path, as there)
import kit_builder  # noqa: E402

BENCH = 8  # benchmark images in the test kit (the default set is the same generator, longer)


FAKE_PNVC = HERE / "_fake_pynvvideocodec"  # a stand-in PyNvVideoCodec (PyAV), importable from this folder


def fake_pynvvideocodec_wheel(folder: Path) -> Path:
    """A wheel of the stand-in PyNvVideoCodec (pure Python: pip installs it for this interpreter)."""
    import base64

    name, dist = "pynvvideocodec-0.0.0+fake-py3-none-any.whl", "pynvvideocodec-0.0.0+fake.dist-info"
    files = {
        "PyNvVideoCodec/__init__.py": (FAKE_PNVC / "PyNvVideoCodec" / "__init__.py").read_bytes(),
        f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: pynvvideocodec\nVersion: 0.0.0+fake\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return folder / name


@pytest.fixture(scope="module")
def kit(tmp_path_factory, ffnvcodec, original_path):
    """The kit, built by its one command: python tools/gpu_kit OUT (here with a small benchmark set, and
    the stand-in PyNvVideoCodec's wheel, which fits in so small a kit)."""
    out = tmp_path_factory.mktemp("kit") / "kit"
    wheel = fake_pynvvideocodec_wheel(tmp_path_factory.mktemp("wheel"))
    # OUT relative to the working folder, as a user types it.
    command = [
        sys.executable,
        str(KIT_TOOL),
        "kit",
        "--bench-images",
        str(BENCH),
        "--pynvvideocodec-wheel",
        str(wheel),
    ]
    env = {**os.environ, "BZNA_TF_FIXTURES": str(original_path.parent)}  # the fixture the tests compare with
    r = subprocess.run(
        [*command, "--ffnvcodec-include", ffnvcodec], capture_output=True, text=True, cwd=out.parent, env=env
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("on the GPU machine: bash kit/run.sh"), r.stdout
    return out, json.loads((out / "kit.json").read_text())


@pytest.fixture(scope="module")
def ran_kit(kit):
    """``bash run.sh --no-bench`` on this machine (no GPU): it builds the core, then reports the driver."""
    nvcc = _build.nvcc()
    if nvcc is None:
        pytest.skip("no nvcc: pip install 'bzna-tf[gpu-build]' (.ci/gpu-build runs these tests)")
    out, _ = kit
    env = {**os.environ, "NVCC": nvcc, "PYTHON": sys.executable}
    r = subprocess.run(
        ["bash", str(out / "run.sh"), "--no-bench"], capture_output=True, text=True, env=env, timeout=900
    )
    return r


@pytest.fixture(scope="module")
def core(kit, ran_kit):
    library = kit[0] / "build" / "libbzna_tf_gpu_core.so"
    if not library.exists():
        pytest.fail(f"run.sh built no core library:\n{ran_kit.stdout[-3000:]}\n{ran_kit.stderr[-3000:]}")
    return GpuCore(library)


def last_json(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert lines, "no output"
    return json.loads(lines[-1])


# ------------------------------------------------------------------------------------------------ the kit


def test_kit_holds_what_the_gpu_machine_needs(kit):
    out, info = kit
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    expected = {
        "run.sh",
        "README.txt",
        "kit.json",
        "kit/run_kit.py",
        "src/custom_ops/lib/warp.h",
        "src/custom_ops/gpu/core/bzna_gpu.h",
        "include/ffnvcodec/dynlink_loader.h",
        "py/bzna_tf/format/reader.py",
        "py/bzna_tf/ops/_build.py",
        "py/bzna_tf/ops/gpu_core.py",
        "data/fixture/original.bzna",
        "data/fixture/manifest.json",
        "data/reference.npz",
        "data/reference.json",
        *(f"data/{name}" for name in kit_bench.BENCH_FILES),
    }
    assert expected <= files, sorted(expected - files)
    core_sources = {p.name for p in (_build.source_dir() / "gpu" / "core").iterdir() if p.is_file()}
    assert {p.name for p in (out / "src/custom_ops/gpu/core").iterdir()} == core_sources
    # Implicit namespace packages: nothing imports bzna_tf/__init__.py (TensorFlow) there.
    assert "py/bzna_tf/__init__.py" not in files and "py/bzna_tf/ops/__init__.py" not in files
    assert not [f for f in files if "__pycache__" in f]
    size = sum((out / f).stat().st_size for f in files)
    assert size == info["bytes"] <= kit_builder.SIZE_LIMIT
    assert os.access(out / "run.sh", os.X_OK)
    described = json.loads((out / "kit.json").read_text())
    bench = described["bench"]
    assert bench["images"] == BENCH and bench["crf"] == kit_bench.BENCH_CRF
    assert bench["quality"] == DEFAULT_QUALITY and bench["crf_raised_for_size"] is False
    # Each set and JPEG group says its bytes and quality, for the GPU run to compare at known quality.
    assert set(bench["sets"]) == set(kit_bench.BENCH_SETS) and set(bench["jpeg"]) == {"imagenet", "small"}
    for figures in (*bench["sets"].values(), *bench["jpeg"].values()):
        assert 25 < figures["rgb_psnr_db"] < 60 and figures.get("bytes_per_picture", 1) > 0
    sets = bench["sets"]
    assert sets["small_compact"]["file_bytes_per_picture"] < 0.5 * sets["small"]["file_bytes_per_picture"]
    readme = (out / "README.txt").read_text()
    crf = f"CRF {kit_bench.BENCH_CRF}"
    assert "bash run.sh" in readme and crf in readme and "{" not in readme.split("JSON object")[0]
    assert "small_compact" in readme and f"JPEG q{kit_bench.JPEG_QUALITY}" in readme


def test_kit_python_imports_without_tensorflow(kit, tmp_path):
    out, _ = kit
    (tmp_path / "tensorflow.py").write_text("raise ImportError('TensorFlow must not be imported')\n")
    code = (
        "import sys\n"
        "import bzna_tf.format, bzna_tf.ops.gpu_core, bzna_tf.ops._build\n"
        "from bzna_tf.format import BznaFile\n"
        "f = BznaFile(sys.argv[1])\n"
        "assert len(f) == int(sys.argv[2]) and f.sample(0).thumb.annexb()[:4] == b'\\x00\\x00\\x00\\x01'\n"
        "assert 'tensorflow' not in sys.modules\n"
        "print(bzna_tf.format.__file__, bzna_tf.ops.gpu_core.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{out / 'py'}"}
    r = subprocess.run(
        [sys.executable, "-B", "-c", code, str(out / "data" / "bench.bzna"), str(BENCH)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert all(p.startswith(str(out / "py")) for p in r.stdout.split()), r.stdout


def test_reference_outputs_are_the_cpu_ops(kit, manifest, original_path):
    """Stored planes are the fixture's bit-exact thumbnails; stored outputs are the CPU ops' outputs."""
    import tensorflow as tf

    from bzna_tf.format import BznaFile
    from bzna_tf.ops import decode_warp, warp_rgb, warp_yuv420

    out, _ = kit
    refs = np.load(out / "data" / "reference.npz")
    meta = json.loads((out / "data" / "reference.json").read_text())
    y, cb, cr = refs["thumb_y"], refs["thumb_cb"], refs["thumb_cr"]
    for i in range(len(y)):
        md5 = hashlib.md5(y[i].tobytes() + cb[i].tobytes() + cr[i].tobytes()).hexdigest()
        assert md5 == manifest["samples"][i]["decoded"]["thumb"]["yuv420p_md5"], i
    names = set(meta["cases"])
    required = {"rotation", "flip_h", "flip_v", "random_resized_crop", "upscale", "perspective", "oob_fill"}
    required |= {"picture_sizes"}
    assert required | {"nchw", "non_square"} <= names and len(names) >= 8
    assert np.any(refs["perspective.matrices"][:, 2, :2] != 0)
    assert any(v != 0 for v in meta["cases"]["oob_fill"]["oob"])
    assert meta["cases"]["nchw"]["channels_first"] and meta["cases"]["non_square"]["out_shape"] == [48, 80]
    # The border band: the corner crops' outer output pixels read within half a pixel beyond the
    # outer pixel centres, on every side, and none of them is the fill colour.
    edge, fill = refs["edge_upscale.decode_warp"], meta["cases"]["edge_upscale"]["oob"]
    band = {"left": 0, "right": 0, "top": 0, "bottom": 0}
    for m, (h, w) in zip(refs["edge_upscale.matrices"], refs["thumb_shapes"], strict=True):
        x, yy = ref_points(m, *meta["cases"]["edge_upscale"]["out_shape"])
        band["left"] += int(((x >= -0.5) & (x < 0)).sum())
        band["right"] += int(((x > w - 1) & (x <= w - 0.5)).sum())
        band["top"] += int(((yy >= -0.5) & (yy < 0)).sum())
        band["bottom"] += int(((yy > h - 1) & (yy <= h - 0.5)).sum())
        assert x.min() >= -0.5 and yy.min() >= -0.5 and x.max() <= w - 0.5 and yy.max() <= h - 0.5
    assert all(band.values()), band
    assert not np.any(np.all(edge == np.float32(fill), axis=-1))
    # The flat pictures' references are flat, in the picture's colour for RGB.
    for name, c in meta["constant"].items():
        for suffix in ("", "_antialias"):
            for kind in ("rgb", "yuv"):
                out = refs[f"constant.{name}.{kind}_out{suffix}"]
                assert np.all(out == out[:, :1, :1]), (name, kind, suffix)
            np.testing.assert_array_equal(refs[f"constant.{name}.rgb_out{suffix}"][0, 0, 0], c["colour"])
    # Picture sizes: the thumbnails are pictures smaller than their 512 x 512 frames. The zoom-out
    # reaches beyond every picture's right and bottom edges into its frame's padding: the fill colour
    # there, where decode_warp without the sizes shows the padding.
    c = meta["cases"]["picture_sizes"]
    hw, sized = refs["picture_sizes.picture_sizes"], refs["picture_sizes.decode_warp"]
    assert c["picture_sizes"] and not c["channels_first"] and hw.dtype == np.int32
    np.testing.assert_array_equal(hw, refs["thumb_shapes"])
    assert (hw < y.shape[1:]).any(axis=1).sum() >= 10  # most thumbnails are padded
    with BznaFile(original_path) as f:
        pictures = tf.constant([f.sample(i).thumb.annexb() for i in range(len(f))])
    kw = dict(bias=c["bias"], norm=c["norm"], oob_color=c["oob"])
    m = refs["picture_sizes.matrices"]
    np.testing.assert_array_equal(
        decode_warp(pictures, m, c["out_shape"], picture_sizes=hw, **kw).numpy(), sized
    )
    framed = decode_warp(pictures, m, c["out_shape"], **kw).numpy()
    padding = {"right": 0, "bottom": 0}
    fh, fw = y.shape[1:]
    for i, (h, w) in enumerate(hw):
        x, yy = ref_points(m[i], *c["out_shape"])
        inside = (x >= -0.5) & (x <= w - 0.5) & (yy >= -0.5) & (yy <= h - 0.5)
        in_frame = (x >= -0.5) & (x <= fw - 0.5) & (yy >= -0.5) & (yy <= fh - 0.5)
        np.testing.assert_array_equal(
            sized[i][~inside], np.broadcast_to(np.float32(c["oob"]), sized[i][~inside].shape)
        )
        assert not np.any(np.all(sized[i][inside] == np.float32(c["oob"]), axis=-1)), i
        # Away from the right and bottom edges the two agree: where neither luma nor chroma (half as
        # wide: its last sample's centre is at w - 1.5 for an even width) reads beyond the picture.
        away = inside & (x < w - 1.5) & (yy < h - 1.5)
        np.testing.assert_array_equal(sized[i][away], framed[i][away])
        padding["right"] += int((in_frame & (x > w - 0.5)).sum())
        padding["bottom"] += int((in_frame & (yy > h - 0.5)).sum())
        assert not np.array_equal(sized[i], framed[i]) or (h, w) == (fh, fw), i
    assert all(v > 100 for v in padding.values()), padding
    # All out of bounds: every pixel is the oob colour as given (what bzna_gpu_fill_oob writes).
    everywhere = refs["all_oob.decode_warp"]
    oob = np.array(meta["cases"]["all_oob"]["oob"], np.float32)
    assert meta["cases"]["all_oob"]["channels_first"] and np.any(oob != 0)
    np.testing.assert_array_equal(everywhere, np.broadcast_to(oob[None, :, None, None], everywhere.shape))
    for name in ("rotation", "perspective", "oob_fill", "nchw", "single_matrix"):
        assert meta["cases"][name]["picture_sizes"] is False  # the decoded frames' sizes
        c = meta["cases"][name]
        kw = dict(
            bias=c["bias"],
            norm=c["norm"],
            oob_color=c["oob"],
            data_format="NCHW" if c["channels_first"] else "NHWC",
        )
        m = refs[f"{name}.matrices"]
        ref = refs[f"{name}.decode_warp"]
        np.testing.assert_array_equal(decode_warp(pictures, m, c["out_shape"], **kw).numpy(), ref)
        yuv = refs[f"{name}.warp_yuv420"] if f"{name}.warp_yuv420" in refs.files else ref
        np.testing.assert_array_equal(warp_yuv420(y, cb, cr, m, c["out_shape"], **kw).numpy(), yuv)
    rgb = meta["rgb"]
    for dtype in ("uint8", "float32"):
        again = warp_rgb(
            refs[f"rgb_{dtype}.images"],
            refs["rgb.matrices"],
            rgb["out_shape"],
            bias=rgb["bias"],
            norm=rgb["norm"],
            oob_color=rgb["oob"],
        )
        np.testing.assert_array_equal(again.numpy(), refs[f"rgb_{dtype}.out"])


def test_bench_set_is_reproducible_and_imagenet_sized(kit, original_path):
    out, _ = kit
    photos = kit_bench._source_photos(original_path.parent)
    for i in range(3):
        a = kit_bench.bench_image(kit_bench.BENCH_SEED, i, photos)
        np.testing.assert_array_equal(a, kit_bench.bench_image(kit_bench.BENCH_SEED, i, photos))
        assert a.dtype == np.uint8 and max(a.shape[:2]) <= 512
        b = kit_bench.bench_image(kit_bench.BENCH_SEED, i, photos, "small")
        assert b.dtype == np.uint8 and max(b.shape[:2]) <= 96
    meta = np.load(out / "data" / "bench_meta.npz")
    assert (meta["coded_shapes"] == 512).all() and (meta["shapes"] <= 512).all()
    assert meta["matrices"].shape == (kit_bench.BENCH_EPOCHS, BENCH, 3, 3)
    compact = np.load(out / "data" / "bench_compact_meta.npz")
    np.testing.assert_array_equal(compact["shapes"], meta["shapes"])  # the same images, smaller frames
    assert (compact["coded_shapes"] % 64 == 0).all() and (compact["coded_shapes"] >= compact["shapes"]).all()
    assert (compact["coded_shapes"] <= 512).all() and (compact["coded_shapes"] < 512).any()
    small = np.load(out / "data" / "small_meta.npz")
    assert (small["coded_shapes"] == 512).all() and (small["shapes"] <= 96).all()
    assert (np.load(out / "data" / "small_compact_meta.npz")["coded_shapes"] == 144).all()
    for name in ("bench_jpeg.npz", "small_jpeg.npz"):
        jpeg = np.load(out / "data" / name)
        assert len(jpeg["offsets"]) == BENCH + 1
        first = jpeg["data"][jpeg["offsets"][0] : jpeg["offsets"][1]].tobytes()
        assert first[:2] == b"\xff\xd8"


def test_builder_errors_say_what_is_wrong(tmp_path, ffnvcodec, original_path, monkeypatch):
    monkeypatch.setenv("BZNA_TF_FIXTURES", str(original_path.parent))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(kit_builder.KitError, match="--force"):
        kit_builder.build_kit(tmp_path / "full", log=None)
    with pytest.raises(kit_builder.KitError, match="would exceed 1.0 MiB"):
        kit_builder.build_kit(tmp_path / "small", size_limit=2**20, ffnvcodec_include=ffnvcodec, log=None)
    with pytest.raises(kit_builder.KitError, match="nv-codec-headers"):
        kit_builder.copy_ffnvcodec(tmp_path / "h", str(tmp_path))
    with pytest.raises(ValueError, match="bench_images"):
        kit_builder.build_kit(tmp_path / "zero", bench_images=0, log=None)


def test_kit_fetches_nv_codec_headers_as_the_gpu_build_does(tmp_path, monkeypatch):
    """None installed and no --ffnvcodec-include: the kit fetches them through _build's one path."""
    from _fake_apt import HEADERS, PACKAGE, fake_apt

    monkeypatch.setattr(_build, "_installed_ffnvcodec", lambda: None)
    log = fake_apt(tmp_path, monkeypatch)
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    assert kit_builder.copy_ffnvcodec(tmp_path / "kit", None) == sorted(HEADERS)
    for name, text in HEADERS.items():
        assert (tmp_path / "kit" / "include" / "ffnvcodec" / name).read_text() == text
    assert log.read_text().splitlines() == [f"download {PACKAGE}"]
    assert _build.ffnvcodec_include() == str(tmp_path / "cache" / "ffnvcodec" / "include")  # the build's too

    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "other-cache"))
    monkeypatch.setenv("FAKE_APT_FAIL", "1")
    with pytest.raises(
        kit_builder.KitError, match="nv-codec-headers to ship: could not fetch.*exited with status 100"
    ):
        kit_builder.copy_ffnvcodec(tmp_path / "kit2", None)


def test_kit_is_built_from_its_own_checkout(monkeypatch, tmp_path):
    """The kit ships this checkout's sources, so its references must come from this checkout's bzna_tf."""
    kit_builder.check_checkout()  # this checkout's bzna_tf is the one imported here
    monkeypatch.setattr(kit_builder, "PACKAGE", tmp_path / "bzna_tf")
    with pytest.raises(kit_builder.KitError, match=r"but bzna_tf is imported from .*pip install -e"):
        kit_builder.check_checkout()


def test_the_kit_is_tooling_not_runtime(tmp_path):
    """bzna_tf/ holds no kit module, and neither does the wheel `pip wheel .` builds."""
    kit_modules = {"gpu_kit", "_kit_run", "_kit_bench", *(p.stem for p in KIT_TOOL.glob("*.py"))}
    kit_modules.discard("__main__")
    assert not [p for p in (ROOT / "bzna_tf").rglob("*.py") if p.stem in kit_modules]
    # A copy of the checkout (no build/ folder left over to leak stale files into the wheel).
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=checkout_ignore, symlinks=True)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "bzna_tf/ops/gpu_core.py" in names and "bzna_tf/ops/_build.py" in names  # the runtime's part
    assert not [n for n in names if Path(n).stem in kit_modules or n.startswith("tools/")], names


# ------------------------------------------------------------------------------ run.sh on this machine


def test_run_sh_names_the_missing_driver(ran_kit):
    result = last_json(ran_kit.stdout)
    assert ran_kit.returncode == 2, ran_kit.stderr[-3000:]
    assert "libcuda.so.1" in result["error"], result["error"]
    assert result["build"]["core"]["archs"] and result["probe"]["cuda"] is False
    assert "building the GPU core" in ran_kit.stderr


def test_core_links_no_cuda_nor_tensorflow(core):
    r = subprocess.run(["readelf", "-d", core.path], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"readelf failed: {r.stderr}")
    needed = [line.split("[")[1].rstrip("]") for line in r.stdout.splitlines() if "(NEEDED)" in line]
    banned = ("cuda", "cuvid", "nvidia", "tensorflow", "absl")
    assert needed and not [n for n in needed if any(b in n.lower() for b in banned)], needed


def test_core_exports_its_c_api_only(core):
    """Nothing but bzna_gpu.h's functions is exported: not even a C++ runtime the compiler linked in.

    A toolchain that links libstdc++ statically exports its copy otherwise, and a process that
    already loaded the system libstdc++ (NumPy, PyTorch) mixes the two and crashes in the first
    std::ostringstream (seen with such a g++ on a GPU machine; custom_ops/gpu/core/exports.map).
    """
    r = subprocess.run(["nm", "-D", "--defined-only", core.path], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"nm failed: {r.stderr}")
    exported = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    header = (_build.source_dir() / "gpu" / "core" / "bzna_gpu.h").read_text()
    api = set(re.findall(r"\b(bzna_gpu_[a-z0-9_]+)\(", header))
    assert len(api) > 10 and exported == api, sorted(exported ^ api)


# ------------------------------------------------------------------------------- the ctypes binding


PICTURES = [b"\x00\x00\x00\x01\x40\x01", b"\x00\x00\x00\x01\x42\x01"]  # never decoded: checks come first
EYE = np.eye(3, dtype=np.float32)


def invalid_calls(core):
    y = np.zeros((2, 8, 8), np.uint8)
    c = np.zeros((2, 4, 4), np.uint8)
    rgb = np.zeros((2, 8, 8, 3), np.uint8)
    three = np.stack([EYE] * 3)
    return [
        ("matrix_count", lambda: core.decode_warp_host(PICTURES, three, (4, 5))),
        ("output height", lambda: core.decode_warp_host(PICTURES, EYE, (0, 5))),
        ("output width", lambda: core.decode_warp_host(PICTURES, EYE, (4, -5))),
        # The launch grid's y limit: 65535 blocks of 8 rows (device pointers: nothing is allocated).
        ("at most 524280", lambda: core.decode_warp(PICTURES, 1 << 20, 1, 1 << 21, (524281, 5))),
        ("0 bytes", lambda: core.decode_warp_host([b"", b"x"], EYE, (4, 5))),
        (
            r"sample 1 of the batch: expected a picture size \(height, width\) of at least \[1, 1\]\. "
            r"Received \[4, 0\]",
            lambda: core.decode_warp_host(PICTURES, EYE, (4, 5), picture_sizes=[[4, 4], [4, 0]]),
        ),
        (
            r"sample 0 of the batch: .*Received \[-3, 4\]",
            lambda: core.decode_warp(PICTURES, 1 << 20, 1, 1 << 21, (4, 5), picture_sizes=[[-3, 4], [4, 4]]),
        ),
        ("max_height", lambda: core.decode_yuv_host(PICTURES, (0, 512))),
        ("matrix_count", lambda: core.warp_yuv420_host(y, c, c, three, (4, 5))),
        ("matrix_count", lambda: core.warp_rgb_host(rgb, three, (4, 5))),
        ("dtype", lambda: core.warp_rgb(1 << 20, 7, 2, (8, 8), 1 << 21, 1, 1 << 22, (4, 5))),
        ("null", lambda: core.warp_rgb(None, np.uint8, 2, (8, 8), 1 << 21, 1, 1 << 22, (4, 5))),
        ("null", lambda: core.copy(0, 0, 16)),
        ("sessions", lambda: core.set_nvdec_sessions(-1)),
        ("at least 0", lambda: core.fill_oob(-1, 1 << 20, (4, 5))),
        ("output height", lambda: core.fill_oob(2, 1 << 20, (0, 5))),
        ("null", lambda: core.fill_oob(2, None, (4, 5))),
    ]


def test_core_checks_arguments_before_the_driver(core):
    for fragment, call in invalid_calls(core):
        with pytest.raises(GpuInvalidArgumentError, match=fragment) as e:
            call()
        assert e.value.code == INVALID_ARGUMENT and isinstance(e.value, ValueError)


def test_core_null_pointers_and_counts(core):
    """The raw C functions: NULL arrays and a negative count, each refused with its reason."""
    ptrs = (ctypes.c_char_p * 2)(*PICTURES)
    sizes = (ctypes.c_uint64 * 2)(*(len(p) for p in PICTURES))
    params = warp_params((4, 5))
    out = np.zeros((2, 4, 5, 3), np.float32)
    m = EYE.ctypes.data
    byref = ctypes.byref
    lib = core.lib
    hw = np.array([[4, 4], [0, 4]], np.int32).ctypes.data  # NULL (None) is the frames' sizes
    cases = [
        ("pictures", (0, None, sizes, 2, m, 1, None, byref(params), out.ctypes.data)),
        ("sizes", (0, ptrs, None, 2, m, 1, None, byref(params), out.ctypes.data)),
        ("count", (0, ptrs, sizes, -1, m, 1, None, byref(params), out.ctypes.data)),
        ("matrices", (0, ptrs, sizes, 2, None, 1, None, byref(params), out.ctypes.data)),
        ("picture size", (0, ptrs, sizes, 2, m, 1, hw, byref(params), out.ctypes.data)),
        ("params", (0, ptrs, sizes, 2, m, 1, None, None, out.ctypes.data)),
        ("output", (0, ptrs, sizes, 2, m, 1, None, byref(params), None)),
    ]
    for fragment, args in cases:
        assert lib.bzna_gpu_decode_warp_host(*args) == INVALID_ARGUMENT, fragment
        assert fragment in core.last_error(), (fragment, core.last_error())


def test_core_without_a_driver_is_unavailable(core):
    bits, reason = core.probe()
    assert not bits & HAS_CUDA and "libcuda.so.1" in reason
    y = np.zeros((2, 8, 8), np.uint8)
    c = np.zeros((2, 4, 4), np.uint8)
    for call in (
        lambda: core.describe(0),
        lambda: core.decode_warp_host(PICTURES, EYE, (4, 5)),
        lambda: core.decode_yuv_host(PICTURES, (512, 512)),
        lambda: core.warp_yuv420_host(y, c, c, EYE, (4, 5), channels_first=True),
        lambda: core.warp_rgb_host(np.zeros((2, 8, 8, 3), np.float32), EYE, (4, 5)),
        lambda: core.alloc(1024),
    ):
        with pytest.raises(GpuUnavailableError, match="libcuda.so.1") as e:
            call()
        assert e.value.code == UNAVAILABLE and isinstance(e.value, GpuCoreError)


def test_binding_checks_what_the_core_cannot_see(core):
    y = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(TypeError, match="uint8 or float32"):
        core.warp_rgb_host(np.zeros((1, 4, 4, 3), np.int16), EYE, (4, 5))
    with pytest.raises(ValueError, match=r"cb.shape=\(2, 3, 4\)"):
        core.warp_yuv420_host(y, np.zeros((2, 3, 4), np.uint8), np.zeros((2, 4, 4), np.uint8), EYE, (4, 5))
    with pytest.raises(TypeError, match="dtype uint8"):
        core.warp_yuv420_host(y.astype(np.float32), y, y, EYE, (4, 5))
    with pytest.raises(ValueError, match="matrices.shape"):
        core.decode_warp_host(PICTURES, np.zeros((2, 4)), (4, 5))
    with pytest.raises(TypeError, match="list of bytes"):
        core.decode_warp_host(PICTURES[0], EYE, (4, 5))
    with pytest.raises(TypeError, match="picture 1"):
        core.decode_warp_host([PICTURES[0], 3], EYE, (4, 5))
    with pytest.raises(TypeError, match="out_shape"):
        core.decode_warp_host(PICTURES, EYE, 5)
    with pytest.raises(ValueError, match=r"picture_sizes.shape=\(1, 2\)"):
        core.decode_warp_host(PICTURES, EYE, (4, 5), picture_sizes=[[4, 4]])
    with pytest.raises(ValueError, match=r"`picture_sizes` of shape \(2, 2\)"):
        core.decode_warp(PICTURES, 1 << 20, 1, 1 << 21, (4, 5), picture_sizes=[4, 4])
    with pytest.raises(TypeError, match="integer `picture_sizes`"):
        core.decode_warp_host(PICTURES, EYE, (4, 5), picture_sizes=np.full((2, 2), 4.0))
    with pytest.raises(ValueError, match="within int32"):
        core.decode_warp_host(PICTURES, EYE, (4, 5), picture_sizes=[[4, 4], [2**31, 4]])


def test_binding_abi_version_is_the_header_s():
    header = (_build.source_dir() / "gpu" / "core" / "bzna_gpu.h").read_text()
    (version,) = re.findall(r"#define BZNA_GPU_ABI_VERSION (\d+)", header)
    assert int(version) == ABI_VERSION == 4
    assert re.search(r"#define BZNA_GPU_CANCELLED (\d+)", header).group(1) == str(CANCELLED)
    assert issubclass(GpuCancelledError, GpuCoreError)


# ------------------------------------------------------------------------ the runner, with a stand-in core

DRIVER = """
import importlib.util, sys
from pathlib import Path
kit, fake_path = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(kit / "kit"))
import run_kit
spec = importlib.util.spec_from_file_location("_fake_gpu_core", fake_path)
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
def use_kit_python(original=run_kit.use_kit_python):
    original()
    import bzna_tf.ops.gpu_core as gpu_core
    gpu_core.GpuCore = fake.FakeCore
run_kit.use_kit_python = use_kit_python
run_kit.build_core = lambda: Path("fake-core.so")
run_kit._core_json = lambda: {"fake": True}
run_kit.main(sys.argv[3:])
"""


def run_fake(kit_dir, tmp_path, mode, *args, pynvvideocodec="ok"):
    """The runner with the stand-in core (``mode``) and the stand-in PyNvVideoCodec (its variant), imported
    from tests/ (not installed from the kit's wheels/, which the kit fixture's other tests measure)."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {
        **os.environ,
        "FAKE_GPU_CORE": mode,
        "FAKE_PYNVVIDEOCODEC": pynvvideocodec,
        "KIT_PYNVVIDEOCODEC": str(FAKE_PNVC),
        "KIT_RESULTS_DIR": str(tmp_path / "results"),  # the anchors' results file, not in the shared kit
    }
    r = subprocess.run(
        [sys.executable, "-B", str(driver), str(kit_dir), str(HERE / "_fake_gpu_core.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return r, last_json(r.stdout)


@pytest.fixture(scope="module")
def ran_ok(kit, tmp_path_factory):
    """One run of everything with the stand-in core (the runner takes a while: the tests share it)."""
    tmp = tmp_path_factory.mktemp("ran_ok")
    return (tmp, *run_fake(kit[0], tmp, "ok", "--batch", "16", "--repeats", "1", "--quick"))


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_runner_checks_and_times_everything(kit, ran_ok):
    _, r, result = ran_ok
    assert r.returncode == 0 and result["passed"], (result.get("errors"), result.get("failed_checks"))
    checks = result["checks"]
    for track in ("thumb", "input"):
        assert checks["nvdec_decode"][track]["matched"] == checks["nvdec_decode"][track]["total"] == 12
    cases = json.loads((kit[0] / "data" / "reference.json").read_text())["cases"]
    for family in ("decode_warp", "warp_yuv420"):
        assert set(checks[family]) == set(cases)
        assert all(v["pass"] and v["max_abs_diff"] <= v["atol"] for v in checks[family].values())
    assert checks["warp_rgb"]["uint8"]["pass"] and checks["warp_rgb"]["float32"]["pass"]
    assert checks["device_api"]["pass"] and checks["bench_decode"]["matched"] == BENCH
    assert (
        checks["device_api"]["fill_oob"]["pass"] and checks["device_api"]["decode_warp_picture_sizes"]["pass"]
    )
    flat = checks["constant_upscale"]
    assert len(flat) == 12 and all(v["pass"] and v["flat"] for v in flat.values())
    queue = checks["queue"]
    assert queue["ahead_out_of_order"]["tickets"] == [0, 1, 2, 3]
    assert queue["ring_reuse"]["ring_buffers"] == 2 and len(queue["ring_reuse"]["bitwise_equal"]) == 6
    assert queue["ticket_error"]["error_code"] == INVALID_ARGUMENT and queue["ticket_error"]["after"]
    assert [f[0] for f in queue["skip_bad"]["failures"]] == [1] and queue["skip_bad"]["filled_with_oob"]
    shutdown = queue["shutdown"]
    assert shutdown["blocked_collect"] == shutdown["blocked_submit"] == CANCELLED, shutdown
    assert all(v["pass"] for v in queue.values() if isinstance(v, dict))
    bench = result["bench"]
    for figures in (bench["decode_yuv"], bench["decode_warp"], bench["decode_warp_by_sessions"]["1"]):
        assert figures["images_per_s"] > 0 and figures["ms_per_batch_median"] > 0
        assert figures["cpu_core_s_per_image"] >= 0
    # Both layouts of both groups are timed, and their planes checked.
    assert set(result["bench_sets"]) == {"bench_compact", "small", "small_compact"}
    for name, figures in result["bench_sets"].items():
        assert figures["decode_warp"]["images_per_s"] > 0 and figures["decode_yuv"]["images_per_s"] > 0
        assert checks[f"bench_decode_{name}"]["matched"] == BENCH
    assert result["anchor_small"]["available"] or result["anchor_small"]["reason"]
    anchor = result["anchor"]
    if anchor["available"]:  # torch + torchvision with a GPU: figures
        assert anchor["decode_resize_normalise"]["images_per_s"] > 0
    else:
        assert anchor["reason"]
    assert result["device"]["name"].startswith("FakeCore") and result["nvdec"]["available"]
    assert "train_step" not in result  # only with --train-step


def test_runner_times_the_training_step_three_ways(kit, tmp_path):
    """--train-step: the step alone, after the core decodes its batch, while it decodes the next (here with
    the stand-in core, PyTorch's CPU build and a tiny model: the GPU run uses ResNet-50)."""
    pytest.importorskip("torch")
    args = ("--batch", "8", "--repeats", "1", "--quick", "--train-step", "--train-model", "tiny")
    r, result = run_fake(
        kit[0],
        tmp_path,
        "ok",
        *args,
        "--train-steps",
        "2",
        "--train-warmup",
        "1",
        "--train-on-cpu",
        "--results-dir",
        str(tmp_path / "results"),
    )
    assert r.returncode == 0 and result["passed"], (result.get("errors"), r.stderr[-2000:])
    train = result["train_step"]
    assert train["available"] and train["batch"] == 8 and train["model"] == "tiny"
    kinds = ("step_alone", "decode_then_step", "decode_in_decode_then_step", "overlapped", "queue_overlapped")
    for kind in kinds:
        assert train[kind]["steps"] == 2 and train[kind]["ms_median"] > 0, (kind, train[kind])
    # Decoding (FFmpeg + the NumPy warp in the stand-in) is part of the decode-then-step time.
    assert train["decode_then_step"]["ms_min"] >= train["decode_in_decode_then_step"]["ms_min"]
    assert train["decode_then_step_over_alone"] > 0 and train["overlapped_over_alone"] > 0
    assert train["queue_overlapped_over_alone"] > 0 and train["queue_depth"] == 2
    # Issue 38's record: in the results, and as <date>-<gpu>-kit-overlap.json in --results-dir.
    overlap = result["overlap"]
    assert overlap["kind"] == "overlap" and overlap["device"] == train["device"]
    assert overlap["step_ms_alone"] == train["step_alone"]["ms_median"]
    assert overlap["step_ms_overlapped"] == train["queue_overlapped"]["ms_median"]
    assert (
        overlap["tensorflow_gpu_dataset"]["passed"] is None and overlap["tensorflow_gpu_dataset"]["not_run"]
    )
    (written,) = (tmp_path / "results").glob("*-kit-overlap.json")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-cpu-kit-overlap\.json", written.name), written.name
    assert json.loads(written.read_text()) == overlap


def test_the_training_step_needs_cuda():
    torch = pytest.importorskip("torch")
    import argparse

    import run_kit

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    args = argparse.Namespace(train_on_cpu=False, train_model="tiny")
    assert run_kit.bench_train_step(None, args, [], {}) == {
        "available": False,
        "reason": "torch.cuda.is_available() is False",
        "torch": torch.__version__,
    }
    with pytest.raises(ValueError, match="resnet50 or tiny"):
        run_kit._train_model("vgg")


def test_runner_without_nvdec_runs_the_warp_checks(kit, tmp_path):
    r, result = run_fake(kit[0], tmp_path, "no-nvdec", "--no-bench")
    assert r.returncode == 3, result
    assert result["nvdec"] == {"available": False, "reason": "libnvcuvid.so.1 could not be loaded (fake)"}
    assert (
        result["checks"]["decode_warp"] == {"skipped": "no NVDEC"} and "nvdec_decode" not in result["checks"]
    )
    assert all(v["pass"] for v in result["checks"]["warp_yuv420"].values())
    assert result["bench"] == {"skipped": "--no-bench"} and not result["errors"]


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_runner_names_a_failed_check(kit, tmp_path):
    r, result = run_fake(kit[0], tmp_path, "broken-rgb", "--no-bench")
    assert r.returncode == 1 and result["passed"] is False
    assert "warp_rgb.uint8" in result["failed_checks"] and "warp_rgb.float32" not in result["failed_checks"]
    failed = result["checks"]["warp_rgb"]["uint8"]
    assert failed["max_abs_diff"] > failed["atol"] and failed["frac_equal"] == 0


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_runner_finds_a_core_that_fills_the_border_band(kit, tmp_path):
    # A core with Benzina's bounds ([0, W - 1]) frames every upscaled picture with the fill colour.
    r, result = run_fake(kit[0], tmp_path, "benzina-bounds", "--no-bench")
    assert r.returncode == 1 and result["passed"] is False
    failed = set(result["failed_checks"])
    assert {"decode_warp.edge_upscale", "warp_yuv420.edge_upscale"} <= failed
    for name in ("x1.01", "x3.7", "x20"):
        for kind in ("rgb", "yuv", "rgb_antialias", "yuv_antialias"):
            assert f"constant_upscale.{name}.{kind}" in failed
            assert result["checks"]["constant_upscale"][f"{name}.{kind}"]["flat"] is False
    # The random crops change where they reach the band: never as downscales (ImageNet's thumbnails), on
    # the small pictures they enlarge (the repository's fixture), whose first points fall in [-0.5, 0).
    refs = np.load(kit[0] / "data" / "reference.npz")
    frame_h, frame_w = refs["thumb_y"].shape[1:]
    reaches = False
    for m in refs["random_resized_crop.matrices"]:
        x, y = ref_points(m, *kit_builder.REF_OUT)
        inside = (x >= -0.5) & (x <= frame_w - 0.5) & (y >= -0.5) & (y <= frame_h - 0.5)
        reaches |= bool(np.any(inside & ((x < 0) | (x > frame_w - 1) | (y < 0) | (y > frame_h - 1))))
    print("random crops reach the band:", reaches)
    assert ("warp_yuv420.random_resized_crop" in failed) == reaches
    assert ("warp_yuv420.antialias" in failed) == reaches, failed


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_runner_finds_a_core_that_ignores_picture_sizes(kit, tmp_path):
    # A core that warps the whole decoded frame: the padding shows beyond the pictures' right and
    # bottom edges, in the one case that passes the pictures' sizes.
    r, result = run_fake(kit[0], tmp_path, "ignore-picture-sizes", "--no-bench")
    assert r.returncode == 1 and result["passed"] is False
    failed = set(result["failed_checks"])
    assert failed == {"decode_warp.picture_sizes", "device_api.decode_warp_picture_sizes", "device_api"}, (
        failed
    )
    # The warp of each picture's cut planes does not depend on the core's picture_sizes.
    assert result["checks"]["warp_yuv420"]["picture_sizes"]["pass"]


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
@pytest.mark.parametrize(
    ("mode", "failed"),
    [
        # Each ticket gets the next one's batch: wrong results when collected out of order.
        ("queue-order", "queue.ahead_out_of_order"),
        # One ring buffer whatever the depth: two batches held at once overwrite each other.
        ("queue-one-buffer", "queue.ring_reuse"),
        # The ticket after a failed one fails too.
        ("queue-sticky-error", "queue.ticket_error"),
        # SKIP_BAD fills the bad picture without listing it.
        ("queue-skip-silent", "queue.skip_bad"),
        # Destroying decodes what is pending and leaves the blocked collect waiting for it.
        ("queue-no-cancel", "queue.shutdown"),
    ],
)
def test_runner_finds_a_broken_queue(kit, tmp_path, mode, failed):
    r, result = run_fake(kit[0], tmp_path, mode, "--no-bench")
    assert r.returncode == 1 and result["passed"] is False, result.get("errors")
    assert failed in result["failed_checks"], result["failed_checks"]
    # Only the queue's checks: every other check passes with the same stand-in.
    assert all(name.startswith("queue") for name in result["failed_checks"]), result["failed_checks"]


def test_runner_prints_partial_results_at_its_deadline(kit, tmp_path):
    r, result = run_fake(kit[0], tmp_path, "ok", "--no-bench", "--deadline", "0.5")
    assert r.returncode == 124 and "deadline" in result["error"] and result["stage"]


# --------------------------------------------------------------------- the anchors at matched quality


def test_kit_holds_the_anchors_at_matched_quality(kit):
    """Three CRFs of the benchmark's first images, each beside JPEGs whose PSNR is the nearest to its own."""
    import kit_anchor_sets
    import tensorflow as tf

    out, info = kit
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    anchor_files = {f"data/{f}" for f in (*kit_anchor_sets.anchor_files(), "anchors.json")}
    assert {"kit/kit_anchors.py", "wheels/pynvvideocodec-0.0.0+fake-py3-none-any.whl"} | anchor_files <= files
    assert info["pynvvideocodec"]["where"] == "kit"
    described = json.loads((out / "data" / "anchors.json").read_text())
    assert described == info["anchors"] and described["crfs"] == list(kit_anchor_sets.ANCHOR_CRFS)
    assert described["images"] == min(BENCH, kit_anchor_sets.ANCHOR_IMAGES)
    sets = described["sets"]
    default = QUALITY_PRESETS[DEFAULT_QUALITY]["crf"]
    assert [s["crf"] for s in sets] == [default - 5, default, default + 5]
    # A higher CRF: fewer bytes, lower PSNR; and the JPEGs matched to it too.
    for lo, hi in zip(sets, sets[1:], strict=False):
        assert lo["picture_bytes_per_picture"] > hi["picture_bytes_per_picture"]
        assert lo["rgb_psnr_db"] > hi["rgb_psnr_db"]
        assert lo["jpeg"]["rgb_psnr_db"] >= hi["jpeg"]["rgb_psnr_db"]
    photos = kit_bench._source_photos(Path(info["fixture"]["folder"]))
    originals = [kit_bench.bench_image(kit_bench.BENCH_SEED, i, photos) for i in range(described["images"])]
    for s in sets:
        j, target = s["jpeg"], s["rgb_psnr_db"]
        # The JPEG quality brackets the set's PSNR: the one below misses it, the one above reaches it.
        assert j["bracketed"] and j["above"]["quality"] == j["below"]["quality"] + 1, j
        assert j["below"]["rgb_psnr_db"] < target <= j["above"]["rgb_psnr_db"], (target, j)
        # The nearer (a tie at 0.01 dB: the higher quality).
        nearer = min(
            (j["below"], j["above"]), key=lambda p: (round(abs(p["rgb_psnr_db"] - target), 2), -p["quality"])
        )
        assert j["quality"] == nearer["quality"] and j["rgb_psnr_db"] == nearer["rgb_psnr_db"]
        # The stored JPEGs are that quality's, of the same images: measured again here.
        stored = np.load(out / "data" / j["file"])
        data, offsets = stored["data"], stored["offsets"]
        assert len(offsets) == described["images"] + 1
        values = [
            kit_bench._psnr(
                tf.io.decode_jpeg(data[offsets[i] : offsets[i + 1]].tobytes(), channels=3).numpy(), o
            )
            for i, o in enumerate(originals)
        ]
        assert round(float(np.mean(values)), 2) == j["rgb_psnr_db"]
        meta = np.load(out / "data" / f"{s['name']}_meta.npz")
        assert (meta["coded_shapes"] == 512).all() and len(meta["md5"]) == described["images"]
    readme = (out / "README.txt").read_text()
    assert "Anchors at matched quality" in readme and "wheels/pynvvideocodec-0.0.0+fake" in readme


def test_matched_jpeg_quality_is_the_nearest(monkeypatch):
    """The bisection ends on the two qualities around the target and picks the nearer; beyond the range
    it says so; a target that 4:2:0 cannot reach is matched in 4:4:4."""
    import kit_anchor_sets

    calls = []

    def measure(q):  # monotone, with steps: PSNR 20 + 0.25 q, rounded as jpeg_point rounds
        calls.append(q)
        return {"quality": q, "rgb_psnr_db": round(20 + 0.25 * q, 2)}

    for target in (20.6, 33.1, 33.0, 44.9):
        calls.clear()
        m = kit_anchor_sets.match_jpeg_quality(target, measure)
        values = {q: round(20 + 0.25 * q, 2) for q in range(1, 101)}
        best = min(values, key=lambda q: (round(abs(values[q] - target), 2), -q))
        assert m["chosen"]["quality"] == best, (target, m)
        assert m["bracketed"] and m["below"]["rgb_psnr_db"] < target <= m["above"]["rgb_psnr_db"]
        assert len(set(calls)) == len(calls) <= 9  # bisection, each quality measured once
    beyond = kit_anchor_sets.match_jpeg_quality(50.0, measure)
    assert beyond["chosen"]["quality"] == 100 and beyond["above"] is None and not beyond["bracketed"]
    short = kit_anchor_sets.match_jpeg_quality(10.0, measure)
    assert short["chosen"]["quality"] == 1 and short["below"] is None and not short["bracketed"]

    def point(originals, q, chroma="4:2:0"):  # 4:2:0 tops out at 40 dB, 4:4:4 reaches 45
        top = 40.0 if chroma == "4:2:0" else 45.0
        return {"quality": q, "chroma": chroma, "rgb_psnr_db": round(top - 0.2 * (100 - q), 2)}

    monkeypatch.setattr(kit_anchor_sets, "jpeg_point", point)
    high = kit_anchor_sets.match_jpeg([], 42.35)
    assert high["chroma"] == "4:4:4" and high["chosen"]["quality"] == 87 and high["4:2:0_best_db"] == 40.0
    low = kit_anchor_sets.match_jpeg([], 35.05)
    assert low["chroma"] == "4:2:0" and low["chosen"]["quality"] == 75


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_runner_times_the_anchors(kit, ran_ok):
    """Each CRF: the core, the stand-in PyNvVideoCodec (2 instances as the core's 2 sessions, and 1) on the
    same pictures, whose planes match the CPU decoder's, nvJPEG (or its reason) and the ratios."""
    tmp_path, r, result = ran_ok
    assert r.returncode == 0 and result["passed"], (result.get("errors"), r.stderr[-3000:])
    anchors = result["anchors"]
    assert anchors["sessions"] == 2 and anchors["pynvvideocodec"]["available"]
    assert anchors["pynvvideocodec"]["version"] == "0.0.0+fake" and anchors["pynvvideocodec"]["from"]
    default = QUALITY_PRESETS[DEFAULT_QUALITY]["crf"]
    assert list(anchors["sets"]) == [f"anchor_crf{c}" for c in (default - 5, default, default + 5)]
    images = kit[1]["anchors"]["images"]
    for name, s in anchors["sets"].items():
        assert result["checks"][f"bench_decode_{name}"]["matched"] == images
        core, pnvc = s["core"], s["pynvvideocodec"]
        assert pnvc["available"] and pnvc["frames_check"] == {
            "matched": images,
            "total": images,
            "failing": [],
            "pass": True,
        }
        for figures in (
            core["decode_yuv"],
            core["decode_warp"],
            s["core_decode_1_session"],
            pnvc["decode_2"],
        ):
            assert figures["images_per_s"] > 0 and figures["batches"] == 3  # --quick: 3 timed batches
        assert pnvc["decode_1"]["images_per_s"] > 0 and pnvc["instances"] == 2
        ratio = core["decode_yuv"]["images_per_s"] / pnvc["decode_2"]["images_per_s"]
        assert s["core_decode_over_pynvvideocodec"] == round(ratio, 3)
        assert s["meets_goal_core_decode_over_pynvvideocodec"] == (round(ratio, 3) >= 0.95)
        if s["nvjpeg"]["available"]:  # torch + torchvision with a GPU
            assert s["decode_warp_over_nvjpeg"] > 0
        else:
            assert s["nvjpeg"]["reason"] and s["decode_warp_over_nvjpeg"] is None
    assert anchors["table"][2].startswith(f"anchor_crf{default - 5}")
    assert "anchors at matched quality" in r.stderr
    # The results file for benchmarks/results/: what ran, where, and every figure.
    (path,) = (tmp_path / "results").glob("*-fakecore-numpy-ffmpeg-kit-anchors.json")
    assert anchors["results_file"] == str(path)
    saved = json.loads(path.read_text())
    assert saved["kind"] == "kit-anchors" and saved["device"] == "FakeCore (NumPy + FFmpeg)"
    assert saved["commit"] == kit[1]["commit"] and saved["versions"]["pynvvideocodec"] == "0.0.0+fake"
    assert saved["passed"] and saved["anchors"]["sets"] == anchors["sets"]
    assert set(saved["checks"]) == {
        f"{kind}_{name}" for name in anchors["sets"] for kind in ("bench_decode", "pynvvideocodec_frames")
    }


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_anchor_without_a_driver_reports_it(kit, tmp_path):
    """import PyNvVideoCodec raises RuntimeError without a driver: the reason, the core's figures, a pass."""
    r, result = run_fake(
        kit[0], tmp_path, "ok", "--batch", "8", "--repeats", "1", "--quick", pynvvideocodec="no-driver"
    )
    assert r.returncode == 0 and result["passed"], (result.get("errors"), r.stderr[-3000:])
    anchors = result["anchors"]
    reason = "import PyNvVideoCodec failed: RuntimeError: Failed to load NVENC library: libnvidia-encode.so.1"
    assert not anchors["pynvvideocodec"]["available"] and anchors["pynvvideocodec"]["reason"].startswith(
        reason
    )
    for s in anchors["sets"].values():
        assert s["pynvvideocodec"] == {"available": False, "reason": anchors["pynvvideocodec"]["reason"]}
        assert s["core_decode_over_pynvvideocodec"] is None and s["core"]["decode_warp"]["images_per_s"] > 0
    assert anchors["table"][-1].startswith("PyNvVideoCodec: import PyNvVideoCodec failed: RuntimeError")


@pytest.mark.slow  # a whole run of the runner, 5-25 s: .ci/slow runs it
def test_anchor_finds_wrong_planes(kit, tmp_path):
    """A binding whose frames differ from the CPU decoder's: the frames check names them."""
    r, result = run_fake(
        kit[0], tmp_path, "ok", "--batch", "8", "--repeats", "1", "--quick", pynvvideocodec="corrupt"
    )
    for s in result["anchors"]["sets"].values():
        check = s["pynvvideocodec"]["frames_check"]
        assert check["pass"] is False and check["matched"] == 0 and len(check["failing"]) == check["total"]
    (path,) = (tmp_path / "results").glob("*-kit-anchors.json")
    assert json.loads(path.read_text())["passed"] is False


LOAD_PNVC = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kit_anchors
nvc, info = kit_anchors.load_pynvvideocodec(Path(sys.argv[2]))
if nvc is not None and len(sys.argv) > 3:  # decode pictures one per packet, counting frames
    pictures = [Path(p).read_bytes() for p in sys.argv[3:]]
    d = kit_anchors.PyNvDecoders(nvc, 2, (512, 512))
    try:
        d.decode(d.packets(pictures))
        info["decoded"] = len(pictures)
    except RuntimeError as e:
        info["decode_error"] = str(e)
    finally:
        d.close()
print(json.dumps(info))
"""


def _load_pnvc(kit_dir, tmp_path, *pictures, variant="ok", env_path=None):
    env = {**os.environ, "FAKE_PYNVVIDEOCODEC": variant}
    env.pop("KIT_PYNVVIDEOCODEC", None)
    if env_path is not None:
        env["KIT_PYNVVIDEOCODEC"] = str(env_path)
    r = subprocess.run(
        [sys.executable, "-B", "-c", LOAD_PNVC, str(KIT_TOOL), str(kit_dir), *map(str, pictures)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_pynvvideocodec_wheel_is_found_installed_and_imported(tmp_path, original_path):
    """The wheel in the kit's wheels/, beside the kit (<kit>-wheels/) or named by $KIT_PYNVVIDEOCODEC:
    installed once with pip into site/ beside it, then imported; none: the reason says where it looked."""
    none = _load_pnvc(tmp_path / "bare", tmp_path)
    assert "no PyNvVideoCodec wheel in the kit (wheels/) nor beside it (bare-wheels/)" in none["reason"]
    inside = tmp_path / "kit"
    fake_pynvvideocodec_wheel(inside / "wheels")
    first = _load_pnvc(inside, tmp_path)
    assert first["from"] == "kit" and first["version"] == "0.0.0+fake", first
    assert first["install"]["how"] == "pip install --no-deps --no-index --target"
    assert first["module"].startswith(str(inside / "wheels" / "site"))
    assert _load_pnvc(inside, tmp_path)["install"]["how"] == "installed before"
    beside = tmp_path / "other-wheels"
    fake_pynvvideocodec_wheel(beside)
    found = _load_pnvc(tmp_path / "other", tmp_path)
    assert found["from"] == "beside the kit" and found["site"] == str(beside / "site")
    named = _load_pnvc(tmp_path / "bare", tmp_path, env_path=FAKE_PNVC)
    assert named["from"] == "$KIT_PYNVVIDEOCODEC" and named["site"] == str(FAKE_PNVC)
    empty = _load_pnvc(tmp_path / "bare", tmp_path, env_path=tmp_path / "nothing")
    assert "holds no PyNvVideoCodec nor its wheel" in empty["reason"]
    failed = _load_pnvc(inside, tmp_path, variant="no-driver")
    assert failed["reason"].startswith("import PyNvVideoCodec failed: RuntimeError: Failed to load NVENC")
    # A binding that returns no frame for some pictures is refused, not timed.
    from bzna_tf.format import BznaFile

    with BznaFile(original_path) as f:
        for i in range(4):
            (tmp_path / f"p{i}.265").write_bytes(f.sample(i).thumb.annexb())
    pictures = [tmp_path / f"p{i}.265" for i in range(4)]
    assert _load_pnvc(inside, tmp_path, *pictures)["decoded"] == 4
    dropped = _load_pnvc(inside, tmp_path, *pictures, variant="drop")
    assert "frames for 4 pictures: not one frame per picture" in dropped["decode_error"], dropped


def test_a_wheel_too_big_for_the_kit_goes_beside_it(tmp_path):
    """place_wheel: in the kit where it fits, else beside it, in a folder whose install.sh installs it."""
    wheel = fake_pynvvideocodec_wheel(tmp_path / "w")
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "data.bin").write_bytes(b"x" * 10_000)
    room = 10_000 + wheel.stat().st_size + 64 * 1024
    assert kit_builder.place_wheel(tmp_path / "kit", wheel, room, None)["where"] == "kit"
    assert (tmp_path / "kit" / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    shutil.rmtree(tmp_path / "kit" / "wheels")
    assert kit_builder.place_wheel(tmp_path / "kit", wheel, room - 1, None)["where"] == "beside"
    assert not (tmp_path / "kit" / "wheels").exists()
    folder = kit_builder.wheels_folder(tmp_path / "kit")
    assert folder == tmp_path / "kit-wheels"
    kit_builder.write_wheels_folder(folder, wheel, force=False)
    assert "bash kit-wheels/install.sh" in (folder / "README.txt").read_text()
    env = {**os.environ, "PYTHON": sys.executable, "FAKE_PYNVVIDEOCODEC": "ok"}
    r = subprocess.run(["bash", str(folder / "install.sh")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and last_json(r.stdout) == {
        "installed": True,
        "import": "ok",
        "version": "0.0.0+fake",
    }
    # The runner finds what install.sh installed, and does not install it again.
    again = _load_pnvc(tmp_path / "kit", tmp_path)
    assert again["from"] == "beside the kit" and again["install"]["how"] == "installed before"
    env["FAKE_PYNVVIDEOCODEC"] = "no-driver"
    r = subprocess.run(["bash", str(folder / "install.sh")], capture_output=True, text=True, env=env)
    assert last_json(r.stdout)["import"].startswith("RuntimeError: Failed to load NVENC library")
    (folder / "mine.txt").write_text("not the builder's")
    with pytest.raises(kit_builder.KitError, match="holds other files"):
        kit_builder.write_wheels_folder(folder, wheel, force=False)
    kit_builder.write_wheels_folder(folder, wheel, force=True)
    assert not (folder / "mine.txt").exists()
