"""``python -m bzna_tf``: the ``bzna-tf`` command, where the environment's scripts folder is not on PATH."""

import sys

from bzna_tf.cli import main

if __name__ == "__main__":
    sys.exit(main())
