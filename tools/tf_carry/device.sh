#!/usr/bin/env bash
# On the GPU machine, in the checkout's root (a run call's working folder): the calls of the plan that
# `python tools/tf_carry` wrote (.tf_carry/PLAN.txt).
#   bash tools/tf_carry/device.sh receive   every call but the last: checks the parts that arrived
#   bash tools/tf_carry/device.sh final     the last call: receive, install TensorFlow, run the checks
#   bash tools/tf_carry/device.sh install | run   the two halves of final, by hand
# Results go to $OUT (the run tool's folder), else .tf_carry/out. $TF_CARRY_PYTHON picks the Python
# (default python3), $TF_CARRY_DIR the carry (default .tf_carry), $TF_CARRY_VENV the venv made there.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
py="${TF_CARRY_PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
  echo "tf_carry: STOP: no $py on PATH (set TF_CARRY_PYTHON)" >&2
  exit 2
fi
exec "$py" -u tools/tf_carry/device_run.py "$@"
