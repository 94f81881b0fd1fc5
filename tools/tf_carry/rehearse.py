"""Rehearse the plan of a built carry on this machine: the calls one after another, timed.

``python tools/tf_carry/rehearse.py CARRY WORK [--python PYTHON]``: for each call of CARRY/plan.json,
copies what that call carries into WORK/.tf_carry (as a run call brings it to a warm machine, beside
what earlier calls left), then runs the call's command (``bash tools/tf_carry/device.sh receive``, and
``final`` last) with WORK's carry, venv and $OUT, and times it. Without a GPU the checks that need one
skip or record why; everything else (the parts, the install into a fresh venv, TensorFlow imported
from it, the tests against the carried ops library, model.fit) runs as it would there.

Build a carry for this machine's Python first (the GPU machine's is 3.12), for instance
``python tools/tf_carry --python 3.11 --out /tmp/rehearsal/.tf_carry``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("carry", help="a built carry (its folder holds plan.json)")
    parser.add_argument("work", help="an empty folder: the rehearsal's machine")
    parser.add_argument(
        "--python", default="python3", help="the Python that plays the machine's (%(default)s)"
    )
    args = parser.parse_args(argv)
    carry, work = Path(args.carry).absolute(), Path(args.work).absolute()
    plan = json.loads((carry / "plan.json").read_text())
    dest = work / ".tf_carry"
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        TF_CARRY_DIR=str(dest),
        TF_CARRY_PYTHON=args.python,
        TF_CARRY_VENV=str(work / "venv"),
        OUT=str(work / "out"),
    )
    rows = []
    for k, call in enumerate(plan["calls"], 1):
        t = time.perf_counter()
        for rel in call["carry"]:
            src, dst = carry / rel, dest / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
            shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)
        copy_s = time.perf_counter() - t
        t = time.perf_counter()
        r = subprocess.run(["bash", "-c", call["command"]], cwd=REPO, env=env)
        rows.append((k, call["bytes"], round(copy_s, 1), round(time.perf_counter() - t, 1), r.returncode))
        print(f"rehearse: call {k}: exit {r.returncode} in {rows[-1][3]} s", file=sys.stderr, flush=True)
        if r.returncode and k < len(plan["calls"]):
            break
    print("call  MiB carried  copy s  command s  exit")
    for k, size, copy_s, run_s, code in rows:
        print(f"{k:>4}  {size / 2**20:11.1f}  {copy_s:6.1f}  {run_s:9.1f}  {code:>4}")
    return rows[-1][4] if rows else 1


if __name__ == "__main__":
    sys.exit(main())
