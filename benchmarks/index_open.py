"""Open an ImageNet-sized .bzna index and look up random samples: time and peak memory.

Builds an index-only file with 1,431,167 entries (ImageNet 2012's count): the
outer moov is complete and laid out as the original tools lay it out (co64, as
the real 140 GB file needs), targets and filenames are real, and each sample's
payload is a small placeholder blob (this measures the index, not decoding).
Then, in a fresh process, it times opening the file and random lookups of
(offset, size), target and filename, and reports the process's peak RSS.

    python benchmarks/index_open.py [--samples N] [--lookups K] [--json]

The figures are with the file in the page cache (it was just written).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

IMAGENET_ENTRIES = 1_431_167


def build(path: str, n: int, seed: int = 0) -> None:
    from bzna_tf.format.hevc import HvcC, NalArray
    from bzna_tf.format.sample import build_hvc1
    from bzna_tf.format.writer import FTYP, build_moov

    rng = np.random.default_rng(seed)
    sizes = rng.integers(16, 64, n)
    payload = rng.integers(0, 256, int(sizes.sum()), dtype=np.uint8).tobytes()
    labelled = n - min(n // 14, 100_000)  # an unlabelled tail, like ImageNet's test split
    targets = rng.integers(0, 1000, labelled).astype("<i8")
    names = [f"n{1440764 + i % 1000:08d}_{i}.JPEG\0".encode() for i in range(n)]
    name_sizes = np.fromiter(map(len, names), np.int64, n)
    hvcc = HvcC(
        1, 90, [NalArray(32, [b"\x40\x01"]), NalArray(33, [b"\x42\x01"]), NalArray(34, [b"\x44\x01"])]
    )
    start = len(FTYP) + 16
    offsets = start + np.cumsum(sizes) - sizes
    tg_off = start + len(payload)
    fn_off = tg_off + targets.nbytes
    end = fn_off + int(name_sizes.sum())
    moov = build_moov(
        input_offsets=offsets,
        input_sizes=sizes,
        num_targets=labelled,
        targets_offset=tg_off,
        name_sizes=name_sizes,
        names_offset=fn_off,
        thumb_offsets=offsets,
        thumb_sizes=sizes,
        thumb_entry=build_hvc1(hvcc.to_bytes(), (512, 512)),
        force_co64=True,
    )
    with open(path, "wb") as f:
        f.write(FTYP + struct.pack(">I4sQ", 1, b"mdat", end - len(FTYP)))
        f.write(payload)
        f.write(targets.tobytes())
        f.write(b"".join(names))
        f.write(moov)


def measure(path: str, lookups: int, repeats: int = 5) -> dict:
    """Runs in a fresh process: import, open, look up; peak RSS of this process."""

    def rss_mb():
        # VmHWM is this address space's peak; ru_maxrss would also count the
        # parent's memory at fork time (Linux carries it across exec).
        try:
            with open("/proc/self/status") as st:
                for line in st:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    import bzna_tf

    base = rss_mb()
    t = time.perf_counter()
    f = bzna_tf.BznaFile(path)
    open_s = time.perf_counter() - t
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(f), lookups).tolist()
    t = time.perf_counter()
    for i in idx:
        f.sample_location(i)
        f.target(i)
        f.filename(i)
    lookup_us = (time.perf_counter() - t) / lookups * 1e6
    peak = rss_mb()
    t = time.perf_counter()
    assert len(f.targets) == len(f)
    all_targets_s = time.perf_counter() - t
    n = len(f)
    f.close()
    opens = []
    for _ in range(repeats):
        t = time.perf_counter()
        bzna_tf.BznaFile(path).close()
        opens.append(time.perf_counter() - t)
    return {
        "samples": n,
        "file_mb": round(os.path.getsize(path) / 2**20, 1),
        "open_s": round(open_s, 4),
        "open_median_s": round(float(np.median(opens)), 4),
        "lookup_us": round(lookup_us, 2),
        "all_targets_s": round(all_targets_s, 4),
        "peak_rss_mb": round(peak, 1),
        "import_rss_mb": round(base, 1),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=IMAGENET_ENTRIES)
    p.add_argument("--lookups", type=int, default=10_000)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.lookups)))
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "index_only.bzna")
        t = time.perf_counter()
        build(path, args.samples)
        build_s = time.perf_counter() - t
        r = subprocess.run(
            [sys.executable, __file__, "--measure", path, "--lookups", str(args.lookups)],
            check=True,
            capture_output=True,
            text=True,
        )
        res = json.loads(r.stdout)
        res["build_s"] = round(build_s, 2)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['samples']:,} entries, {res['file_mb']} MB file (built in {res['build_s']} s)")
        print(
            f"  open            {res['open_s'] * 1e3:8.1f} ms  (median of 5 more: "
            f"{res['open_median_s'] * 1e3:.1f} ms)"
        )
        print(f"  random lookup   {res['lookup_us']:8.1f} us  (location + target + filename)")
        print(f"  all targets     {res['all_targets_s'] * 1e3:8.1f} ms")
        print(
            f"  peak RSS        {res['peak_rss_mb']:8.1f} MB  (after importing bzna_tf: "
            f"{res['import_rss_mb']} MB)"
        )


if __name__ == "__main__":
    main()
