"""Packaging: one version, a clean build (no setuptools warnings), and an sdist and wheel that hold
what a fresh machine needs for ``import bzna_tf`` and the first build of the ops.

The sdist and wheel are built here with setuptools' own backend from a copy of the project, without
build isolation (the ``test`` extra installs setuptools >= 77), the wheel from the unpacked sdist as
``python -m build`` does. ``.ci/wheel`` goes further: it installs the wheel into a fresh venv outside
the checkout, builds the ops there and runs the op tests against it.
"""

import email.parser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import checkout_ignore

import bzna_tf

ROOT = Path(__file__).resolve().parents[1]
NATIVE_SUFFIXES = (".h", ".cc", ".cu")


def test_the_installed_metadata_has_the_package_version():
    """pyproject.toml reads the version from bzna_tf.__version__: the metadata pip installed agrees.

    After a change of bzna_tf.__version__ in an editable install, reinstall (pip install -e .) to
    update the metadata.
    """
    assert importlib.metadata.version("bzna-tf") == bzna_tf.__version__


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(sdist, wheel, the backend's output): the sdist built from a copy, the wheel from the sdist."""
    tmp = tmp_path_factory.mktemp("packaging")
    project, out = tmp / "project", tmp / "dist"
    shutil.copytree(ROOT, project, ignore=checkout_ignore, symlinks=True)
    out.mkdir()
    # PYTHONDONTWRITEBYTECODE makes setuptools say "byte-compiling is disabled": not a packaging fault.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS")}
    logs = []

    def backend(call, cwd):
        code = f"import sys; from setuptools import build_meta; print(build_meta.{call}(sys.argv[1]))"
        r = subprocess.run(
            [sys.executable, "-c", code, str(out)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, f"{call} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        logs.append(r.stdout + r.stderr)
        return out / r.stdout.strip().splitlines()[-1]

    sdist = backend("build_sdist", project)
    with tarfile.open(sdist) as t:
        # The "data" filter where this Python has it (3.11.4 and later; 3.14 makes it the default).
        t.extractall(tmp / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    wheel = backend("build_wheel", tmp / "unpacked" / sdist.name.removesuffix(".tar.gz"))
    return sdist, wheel, "\n".join(logs)


def test_the_build_prints_no_warning(built):
    """No setuptools deprecation (the license), no "Package would be ignored" (the C++ folders)."""
    *_, log = built
    warnings = [line for line in log.splitlines() if re.search("warn|deprecat|would be ignored", line, re.I)]
    assert not warnings, "\n".join(warnings)


def _metadata(text):
    return email.parser.Parser().parsestr(text)


def test_the_wheel_holds_the_package_its_sources_and_the_license(built):
    _, wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist_info = f"bzna_tf-{bzna_tf.__version__}.dist-info"
        meta = _metadata(z.read(f"{dist_info}/METADATA").decode())
        license_text = z.read(f"{dist_info}/licenses/LICENSE").decode()
    assert wheel.name == f"bzna_tf-{bzna_tf.__version__}-py3-none-any.whl"
    assert meta["Version"] == bzna_tf.__version__ and meta["Name"] == "bzna-tf"
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    assert license_text == (ROOT / "LICENSE").read_text() and license_text.startswith("MIT License")
    # Only the package and its metadata: no tests, tools, examples or benchmarks.
    assert {n.split("/")[0] for n in names} == {"bzna_tf", dist_info}
    # Every module of the package, and every C++/CUDA file the ops' builds compile or include.
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bzna_tf").rglob("*.py")}
    native = {
        "bzna_tf/custom_ops/" + p.relative_to(ROOT / "custom_ops").as_posix()
        for p in (ROOT / "custom_ops").rglob("*")
        if p.suffix in NATIVE_SUFFIXES
    }
    assert "bzna_tf/custom_ops/gpu/core/kernels.cu" in native and "bzna_tf/custom_ops/lib/warp.h" in native
    assert not modules - names, f"modules missing from the wheel: {sorted(modules - names)}"
    assert not native - names, f"C++ sources missing from the wheel: {sorted(native - names)}"


def test_the_sdist_carries_the_license_the_sources_and_the_version(built):
    sdist, _, _ = built
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.removeprefix(top + "/") for n in t.getnames()}
        meta = _metadata(t.extractfile(f"{top}/PKG-INFO").read().decode())
    assert sdist.name == f"bzna_tf-{bzna_tf.__version__}.tar.gz"
    assert meta["Version"] == bzna_tf.__version__ and meta["License-Expression"] == "MIT"
    assert {"LICENSE", "README.md", "pyproject.toml", "bzna_tf/__init__.py"} <= names
    native = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "custom_ops").rglob("*")
        if p.suffix in NATIVE_SUFFIXES
    }
    assert not native - names, f"C++ sources missing from the sdist: {sorted(native - names)}"
