#!/usr/bin/env bash
# Runs one harness for a long time (hours), going on past findings:
#
#   fuzz/run_long.sh HARNESS SECONDS [WORKDIR]
#
# HARNESS is one of fuzz/build/ (make -C fuzz) or fuzz_format (the Python reader). The corpus grows
# in WORKDIR/corpus (default fuzz/build/long/HARNESS; keep it between runs to go on where the last
# run stopped), every finding is saved as WORKDIR/crash-*, leak-*, timeout-* or oom-*, and libFuzzer's
# log is WORKDIR/log. Seeds: fuzz/build/corpus/HARNESS (fuzz/make_corpus.py). Runs niced, one job.
set -euo pipefail
cd "$(dirname "$0")/.."
h=$1
seconds=$2
work=${3:-fuzz/build/long/$h}
mkdir -p "$work/corpus"
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
flags=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" -timeout=10
  -rss_limit_mb=2048 -malloc_limit_mb=1024 -artifact_prefix="$work/" -print_final_stats=1)
if [ "$h" = fuzz_format ]; then
  # atheris has no fork mode: it stops at the first finding.
  cmd=("$PY" fuzz/fuzz_format.py -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
    -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" fuzz/build/corpus/fuzz_container
    fuzz/build/corpus/fuzz_format)
else
  cmd=("fuzz/build/$h" "${flags[@]}" -dict=fuzz/bzna.dict "$work/corpus" "fuzz/build/corpus/$h")
fi
echo "${cmd[*]}" >"$work/log"
nice -n 10 "${cmd[@]}" >>"$work/log" 2>&1
