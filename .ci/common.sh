# Sourced by the CI legs (.ci/run and each leg run alone): where they run and what they share.
# Every leg works in the main venv, .venv, the one the README's test command makes; a leg run alone
# makes it the same way when it is missing.

step() { printf '\n%s: %s (%ds so far)\n' "${LEG:-ci}" "$1" "$SECONDS"; }

fail() {
  echo "${LEG:-ci}: FAILED: $*" >&2
  exit 1
}

# deps_venv VENV [REQUIREMENT...]: a venv at VENV holding the requirements of the project and of its test
# extra, as pyproject.toml lists them (none where Python has no tomllib, before 3.11), and those given, but
# not bzna_tf: a leg's --deps-only, which .ci/run runs in the background beside another install. Fails when
# there is nothing to install.
deps_venv() {
  local venv=$1 requirements
  shift
  mapfile -t requirements < <(
    python3 - <<'PY'
try:
    import tomllib
except ImportError:
    raise SystemExit(0)
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join([*project["dependencies"], *project["optional-dependencies"]["test"]]))
PY
  )
  requirements+=("$@")
  [ "${#requirements[@]}" -gt 0 ] || fail "no requirements read from pyproject.toml (Python >= 3.11 reads it)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "${requirements[@]}"
}

main_venv() {
  if [ ! -x .venv/bin/python ]; then
    step "making .venv as the README's test command does"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q -e '.[test]'
  fi
  . .venv/bin/activate
}

# Runs pytest (arguments as given) under a time limit, writing its JUnit report to $1; fails the leg on
# a test failure, a time-out, no test run, or a test skipped for a reason that does not match $2 (an
# extended regular expression; empty: no skip allowed). A leg exists to run its tests: one that skips
# them because what it installs went missing has not checked anything.
run_tests() {
  local report=$1 allowed=$2 limit=$3
  shift 3
  local rc=0
  timeout -k 30 "$limit" python -m pytest -q -p no:cacheprovider --junitxml="$report" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "the tests did not end within ${limit}s (stopped)"
  elif [ "$rc" -ne 0 ]; then
    fail "pytest exit status $rc"
  fi
  python - "$report" "$allowed" <<'PY' || fail "tests were skipped that this leg must run (listed above)"
import re
import sys
import xml.etree.ElementTree as ET

report, allowed = sys.argv[1], sys.argv[2]
cases = list(ET.parse(report).getroot().iter("testcase"))
bad = [
    f"  {case.get('classname')}::{case.get('name')}: {skip.get('message')}"
    for case in cases
    for skip in case.iter("skipped")
    if not (allowed and re.search(allowed, skip.get("message") or ""))
]
if not cases:
    sys.exit("no test ran")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY
}
