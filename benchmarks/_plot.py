"""Plots of the benchmarks (``--plot FILE.png``): matplotlib, each figure signed with where it came from.

Every plot carries a footer with the command that made it, the date, the TensorFlow version and
the machine (cores, load average), so that a PNG in the docs says how to make it again. The PNG
is written with a 256-colour palette (the docs keep each plot small). matplotlib is in the
``docs`` extra.
"""

from __future__ import annotations

import datetime
import io
import os
import platform
import sys


def provenance(tensorflow: str | None = None) -> str:
    """Two lines: the command; the date, TensorFlow's version, the machine and its load."""
    argv = " ".join(os.path.relpath(a) if a.endswith(".py") else a for a in sys.argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    tf = f"TensorFlow {tensorflow}, " if tensorflow else ""
    return (
        f"python {argv}\n{datetime.date.today().isoformat()}, {tf}{platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load:.1f}"
    )


def figure(width: float = 8.0, height: float = 4.5):
    """A new matplotlib figure (the Agg backend: no display needed)."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("--plot needs matplotlib: pip install '.[docs]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.figure(figsize=(width, height), dpi=100)


def save(fig, path: str, tensorflow: str | None = None) -> None:
    """Writes ``fig`` with its provenance footer to ``path`` as a palette PNG."""
    from PIL import Image

    fig.text(0.01, 0.01, provenance(tensorflow), fontsize=8, color="0.35", ha="left", va="bottom")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(256)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    image.save(path, optimize=True)
    print(f"wrote {path} ({os.path.getsize(path) / 1e3:.0f} kB)", file=sys.stderr)
