"""``bzna-tf verify --no-decode``: checksums in Python against the native reader, in one run.

Without decoding, ``bzna_tf.verify.verify`` checks the samples of large files
with checksums through the native reader (``read_samples``: parse and CRC-32C
in C++, in parallel threads) and those it refuses again in Python; smaller
runs check every sample in Python (``NATIVE_MIN_SAMPLES``). This measures
both ways on the same file, interleaved, at 1 thread and at ``--threads``:

- ``python_ms_per_sample`` / ``native_ms_per_sample``: wall time per sample
  (the best of ``--repeats`` passes), each picture of each sample checked
  against its checksum; ``*_cpu_ms_per_sample`` the process CPU time per
  sample of that pass; ``native_speedup`` the Python time over the native one.

The file repeats the original-tools fixture's per-image mp4s (real ImageNet
photos, about 200 kB each with their thumbnails) to ``--samples`` entries,
written with checksums by bzna_tf's writer. It is read from the page cache
(just written): the figures are the CPU's, not a disk's.

    python benchmarks/verify.py [--samples 3000] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT.parent / "shared" / "fixtures" / "benzina-original"


def make_file(path: Path, samples: int, fixture: Path) -> int:
    """The fixture's per-image mp4s cycled to ``samples`` entries; their mean size in bytes."""
    from bzna_tf import BznaFile, BznaWriter

    with BznaFile(fixture / "benzina_original_mini.bzna") as src:
        mp4s = [src.sample_bytes(i) for i in range(len(src))]
    with BznaWriter(path) as w:
        for k in range(samples):
            w.append_mp4(mp4s[k % len(mp4s)], target=k % 1000, filename=f"{k}.jpg")
    return round(sum(len(mp4s[k % len(mp4s)]) for k in range(samples)) / samples)


def time_verify(path: Path, threads: int, native: bool) -> tuple[float, float]:
    """(wall ms, process CPU ms) per sample of one ``verify(path, decode=False)``."""
    import bzna_tf.verify as v

    v.NATIVE_MIN_SAMPLES = 0 if native else 1 << 62
    wall, cpu = time.perf_counter(), time.process_time()
    report = v.verify(str(path), workers=threads, decode=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if not report.ok or report.files[0].pictures_checked != 2 * report.samples:
        raise SystemExit(f"verify found a problem in the benchmark's own file: {report.to_json()}")
    return 1e3 * wall / report.samples, 1e3 * cpu / report.samples


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=3000, help="samples in the file (default 3000)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (default: all cores)")
    p.add_argument("--repeats", type=int, default=3, help="passes of each; the best is reported")
    p.add_argument("--fixture", type=Path, default=FIXTURE, help="the original-tools fixture folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if not (a.fixture / "benzina_original_mini.bzna").exists():
        p.error(f"the fixture is not at {a.fixture} (give --fixture)")
    import tensorflow as tf

    from bzna_tf.ops import load_library

    load_library()  # build and load outside the timings
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verify.bzna"
        mean = make_file(path, a.samples, a.fixture)
        time_verify(path, a.threads, True)  # the native reader's index of the file, outside the timings
        for threads in sorted({1, a.threads}):
            best = {}
            for _ in range(a.repeats):
                for native in (False, True):  # interleaved: the machine's other jobs disturb both alike
                    got = time_verify(path, threads, native)
                    key = "native" if native else "python"
                    if key not in best or got[0] < best[key][0]:
                        best[key] = got
            rows.append(
                {
                    "threads": threads,
                    "python_ms_per_sample": round(best["python"][0], 3),
                    "python_cpu_ms_per_sample": round(best["python"][1], 3),
                    "native_ms_per_sample": round(best["native"][0], 3),
                    "native_cpu_ms_per_sample": round(best["native"][1], 3),
                    "native_speedup": round(best["python"][0] / best["native"][0], 2),
                }
            )
    out = {
        "rows": rows,
        "samples": a.samples,
        "bytes_per_sample": mean,
        "tensorflow": tf.__version__,
        "cores": os.cpu_count(),
    }
    if a.json:
        print(json.dumps(out))
    else:
        for r in rows:
            print(", ".join(f"{k} {v}" for k, v in r.items()))
        print(f"{a.samples} samples of {mean:,} bytes, TensorFlow {tf.__version__}, {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
