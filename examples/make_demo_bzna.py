"""Make a small .bzna dataset from generated images, then read it back.

    python examples/make_demo_bzna.py demo.bzna [--images 24] [--classes 4]

Each image is drawn (coloured stripes and a disc whose colour depends on its
class), encoded as one H.265 picture with libx265 (through PyAV), and written
with a thumbnail when it exceeds 512x512, exactly as Benzina stores ImageNet.
The last few images are left unlabelled, like ImageNet's test split.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bzna_tf
from bzna_tf.convert import encode_image


def draw(rng, cls, classes):
    h, w = int(rng.integers(96, 720)), int(rng.integers(96, 720))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    stripes = 0.5 + 0.5 * np.sin((xx * np.cos(angle) + yy * np.sin(angle)) / rng.uniform(6, 30))
    img = np.stack([stripes * c for c in rng.uniform(60, 200, 3)], -1)
    hue = 2 * np.pi * cls / classes
    colour = 127.5 + 127.5 * np.array([np.cos(hue), np.cos(hue + 2.1), np.cos(hue + 4.2)])
    cx, cy, r = rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h, rng.uniform(0.15, 0.35) * min(h, w)
    img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = colour
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("output", help="the .bzna file to write")
    p.add_argument("--images", type=int, default=24)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--unlabelled", type=int, default=4, help="images at the end without a target")
    p.add_argument("--preset", default="medium", help="x265 preset (Benzina uses medium)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    t = time.perf_counter()
    with bzna_tf.BznaWriter(args.output) as w:
        for i in range(args.images):
            cls = i % args.classes
            inp, thumb = encode_image(draw(rng, cls, args.classes), preset=args.preset)
            labelled = i < args.images - args.unlabelled
            w.append(inp, thumb=thumb, target=cls if labelled else None, filename=f"demo_{i:05d}.png")
    print(f"wrote {args.output}: {args.images} images in {time.perf_counter() - t:.1f} s")

    with bzna_tf.open_bzna(args.output) as f:
        s = f.sample(0)
        print(
            f"read back: {len(f)} samples, {f.num_labelled} labelled; sample 0 is "
            f"{s.input.size[0]}x{s.input.size[1]} in a {s.input.coded_size[0]}x{s.input.coded_size[1]} "
            f"frame, {len(s.thumb.annexb())} bytes of Annex-B H.265 for its thumbnail"
        )


if __name__ == "__main__":
    main()
