"""nv-codec-headers for the GPU build: found installed, else fetched without root (one code path).

``_build.fetch_ffnvcodec`` runs ``apt-get download libffmpeg-nvenc-dev`` and
``dpkg-deb -x`` into the cache; ``_build.ffnvcodec_include`` finds that copy
afterwards. ``python -m bzna_tf.ops build --gpu``, the GPU kit
(tests/test_gpu_kit.py) and the tests' ``ffnvcodec`` fixture all call it.
Here a stand-in apt-get (tests/_fake_apt.py) serves a real .deb, so no
network is needed.
"""

import io
import json
import types

import pytest
from _fake_apt import HEADERS, PACKAGE, fake_apt

from bzna_tf.ops import _build


@pytest.fixture()
def no_installed_headers(monkeypatch, tmp_path):
    """A fresh cache and no nv-codec-headers installed (whatever this machine has)."""
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "_installed_ffnvcodec", lambda: None)
    return tmp_path / "cache"


def test_fetch_unpacks_debians_package_into_the_cache(no_installed_headers, tmp_path, monkeypatch):
    log = fake_apt(tmp_path, monkeypatch)
    assert _build.ffnvcodec_include() is None  # nothing found, nothing fetched without fetch=True
    assert log.read_text() == ""
    said = io.StringIO()
    include = _build.ffnvcodec_include(fetch=True, log=said)
    assert include == str(_build.fetched_ffnvcodec()) == str(no_installed_headers / "ffnvcodec" / "include")
    for name, text in HEADERS.items():
        assert (_build.fetched_ffnvcodec() / "ffnvcodec" / name).read_text() == text
    assert f"apt-get download {PACKAGE}" in said.getvalue()
    source = json.loads((no_installed_headers / "ffnvcodec" / "source.json").read_text())
    assert source["package"].startswith(f"{PACKAGE}_") and source["package"].endswith(".deb")
    # Fetched once: later calls, and the plain look-up every GPU build makes, find the copy.
    assert _build.fetch_ffnvcodec(log=None) == include
    assert _build.ffnvcodec_include() == include
    assert "nv-codec-headers" not in (_build.gpu_toolchain_error() or "")
    assert log.read_text().splitlines() == [f"download {PACKAGE}"]
    assert not [p.name for p in no_installed_headers.iterdir() if p.name.startswith(".ffnvcodec-")]


def test_a_failed_fetch_says_why_and_leaves_nothing(no_installed_headers, tmp_path, monkeypatch):
    fake_apt(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_APT_FAIL", "1")
    with pytest.raises(_build.BuildError) as e:
        _build.ffnvcodec_include(fetch=True, log=None)
    message = str(e.value)
    assert f"`apt-get download {PACKAGE}` exited with status 100" in message
    assert "Unable to locate package" in message and "$BZNA_TF_FFNVCODEC_INCLUDE" in message
    assert not (no_installed_headers / "ffnvcodec").exists()
    assert not [p.name for p in no_installed_headers.iterdir() if p.name.startswith(".ffnvcodec-")]


def test_without_apt_the_fetch_names_what_to_install(no_installed_headers, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(
        _build.BuildError, match="apt-get and dpkg-deb not found.*apt install libffmpeg-nvenc-dev"
    ):
        _build.fetch_ffnvcodec(log=None)


def test_the_gpu_build_command_fetches_missing_headers(no_installed_headers, tmp_path, monkeypatch, capsys):
    """``python -m bzna_tf.ops build --gpu`` fetches them before building (the build itself stubbed)."""
    from bzna_tf.ops import __main__ as command

    fake_apt(tmp_path, monkeypatch)
    seen = []

    def build_gpu(**kwargs):
        seen.append(_build.ffnvcodec_include())  # what plan_gpu() would find
        return types.SimpleNamespace(core="core.so", warp="warp.so", nvdec="nvdec.so")

    monkeypatch.setattr(command, "build", lambda **kwargs: "ops.so")
    monkeypatch.setattr(command, "build_gpu", build_gpu)
    assert command.main(["build", "--gpu"]) == 0
    assert seen == [str(_build.fetched_ffnvcodec())]
    assert capsys.readouterr().out.split() == ["ops.so", "core.so", "warp.so", "nvdec.so"]
