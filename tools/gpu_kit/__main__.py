"""``python tools/gpu_kit OUT_DIR [--force] ...``: write the GPU kit from this checkout.

Then, on the machine with the GPU: ``bash OUT_DIR/run.sh``. See ``kit_builder.py``
for what the kit holds and ``python tools/gpu_kit --help`` for the options.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This folder (kit_builder, kit_bench), then the checkout: its bzna_tf before any installed one.
sys.path[:0] = [str(HERE), str(HERE.parent.parent)]

from kit_builder import main  # noqa: E402  (after the path is set)

sys.exit(main())
