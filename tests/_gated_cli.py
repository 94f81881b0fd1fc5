"""`bzna-tf ARGS` (bzna_tf.cli.main) whose folder source holds back its images from one on, until a signal.

    python tests/_gated_cli.py GATE MARKER ARGS...

A conversion asks its source for images one by one, in its order. Before handing out image number GATE
(counting from 0), the source creates the file MARKER and waits, for good: a test that waits for MARKER
then interrupts the conversion in a known state, whatever the machine's load (every image before the
gate handed out, none after; tests/test_convert_interrupt.py says which shards that finishes).
With $GATED_CLI_RELEASE naming a file, the source goes on once that file exists.

With $GATED_CLI_HOLD_IMAGE naming an image (its stored name, "a/a_5.ppm"), the worker process that is
given it creates the file $GATED_CLI_HOLD_MARKER and never finishes it (as a huge image would take long):
a conversion stopped then waits for that image, in its shutdown.

With $GATED_CLI_WORKER_GATE naming a path, each worker process, as it starts (importing this file, before
the pool's initializer), creates the file GATE.PID and waits until GATE.release exists: a test then
interrupts the conversion while its workers are starting.
"""

import os
import sys
import time

from bzna_tf.cli import main
from bzna_tf.convert import ImageFolderSource, converter

handed_out = 0

if __name__ == "__mp_main__" and os.environ.get("GATED_CLI_WORKER_GATE"):
    _gate = os.environ["GATED_CLI_WORKER_GATE"]
    with open(f"{_gate}.{os.getpid()}", "w"):
        pass
    _parent, _deadline = os.getppid(), time.monotonic() + 120
    while not os.path.exists(f"{_gate}.release") and os.getppid() == _parent and time.monotonic() < _deadline:
        time.sleep(0.02)
_encode_item = converter.encode_item


def held_encode(item, settings):
    """``encode_item`` in a worker (spawned, it imports this file as ``__mp_main__``), holding one image."""
    if item.filename == os.environ.get("GATED_CLI_HOLD_IMAGE"):
        with open(os.environ["GATED_CLI_HOLD_MARKER"], "w"):
            pass
        while True:  # until the worker is stopped
            time.sleep(3600)
    return _encode_item(item, settings)


def _gated(items):
    def items_until_the_gate(self, indices):
        global handed_out
        for item in items(self, indices):
            if handed_out == gate:
                with open(marker, "w"):
                    pass
                release = os.environ.get("GATED_CLI_RELEASE")
                while not (release and os.path.exists(release)):  # or until a signal ends it
                    time.sleep(0.05 if release else 3600)
            handed_out += 1
            yield item

    return items_until_the_gate


if __name__ == "__main__":
    gate, marker, args = int(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:]
    ImageFolderSource.items = _gated(ImageFolderSource.items)
    if os.environ.get("GATED_CLI_HOLD_IMAGE"):
        converter.encode_item = held_encode
    sys.exit(main(args))
