"""``python tools/tf_carry [--python 3.12] ...``: write TensorFlow's carry for a GPU machine that has none.

Then, one ``run`` call after another on that machine: the commands ``.tf_carry/PLAN.txt`` lists
(``bash tools/tf_carry/device.sh receive``, and ``... final`` last). See ``carry_builder.py`` for
what is carried and ``python tools/tf_carry --help`` for the options.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This folder (carry_builder), tools/gpu_kit (its benchmark set), then the checkout: its bzna_tf first.
sys.path[:0] = [str(HERE), str(HERE.parent / "gpu_kit"), str(HERE.parent.parent)]

from carry_builder import main  # noqa: E402  (after the path is set)

sys.exit(main())
