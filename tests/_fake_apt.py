"""A stand-in ``apt-get`` for the nv-codec-headers fetch: ``apt-get download PACKAGE`` writes a real .deb.

The .deb is made with the real ``dpkg-deb --build`` (so the fetch unpacks it
with the real ``dpkg-deb -x``), holding ``usr/include/ffnvcodec/*.h`` with
known contents; the stand-in logs each call, and ``FAKE_APT_FAIL`` makes it
fail as apt does for an unknown package.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HEADERS = {
    "dynlink_loader.h": "/* stand-in dynlink_loader.h */\n",
    "nvEncodeAPI.h": "/* stand-in nvEncodeAPI.h */\n",
}
PACKAGE = "libffmpeg-nvenc-dev"

APT_GET = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" != download ] || [ "$2" != {package} ] || [ -n "$FAKE_APT_FAIL" ]; then
  echo "E: Unable to locate package $2" >&2
  exit 100
fi
cp "{deb}" ./{package}_12.2.72.0-1_all.deb
"""


def fake_apt(tmp_path: Path, monkeypatch) -> Path:
    """Puts a stand-in apt-get first on PATH; returns the file that logs its calls (one line each)."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed (the fetch unpacks Debian's package with it)")
    tree = tmp_path / "pkg"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {PACKAGE}\nVersion: 12.2.72.0-1\nArchitecture: all\nMaintainer: tests <t@example.org>\n"
        "Description: stand-in nv-codec-headers\n"
    )
    include = tree / "usr" / "include" / "ffnvcodec"
    include.mkdir(parents=True)
    for name, text in HEADERS.items():
        (include / name).write_text(text)
    deb = tmp_path / "stand-in.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(tree), str(deb)],
        check=True,
        capture_output=True,
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt-get.log"
    (bin_dir / "apt-get").write_text(APT_GET.format(log=log, package=PACKAGE, deb=deb))
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log.write_text("")
    return log
