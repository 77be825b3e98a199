#!/usr/bin/env bash
# Rewrites constraints.txt: installs agent-health with its dev tools into a fresh, temporary venv
# with no constraints (so every dependency takes its newest release that pyproject.toml allows)
# and pins exactly what got installed. Then run `bash scripts/test.sh`: it reinstalls .venv from
# the new file (its install stamp covers constraints.txt) and tests against it. Commit the file
# once the suite passes.
#
# `--keep` re-pins without moving anything: the same fresh install, constrained by the current
# file, so only what pyproject.toml changed moves (a dependency dropped leaves with the packages
# only it needed; one added comes in at its newest release).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
constrain=()
how="unconstrained"
if [ "${1:-}" = "--keep" ]; then
  constrain=(-c "$PWD/constraints.txt")
  how="with the current pins (--keep)"
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--keep]" >&2; exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "==> installing agent-health[dev] $how into a temporary venv (a few minutes)"
"$PY" -m venv "$tmp/venv"
if ! { "$tmp/venv/bin/python" -m pip install "${constrain[@]}" --upgrade pip \
    && "$tmp/venv/bin/python" -m pip install "${constrain[@]}" -e '.[dev]'; } >"$tmp/install.log" 2>&1; then
  tail -n 40 "$tmp/install.log"; echo "install failed" >&2; exit 1
fi
{
  echo "# Every package of the tested development venv, pinned: scripts/_venv.sh (and so CI) installs"
  echo "# with \`pip install -c constraints.txt -e '.[dev]'\`, and tests/core/test_constraints.py checks the"
  echo "# venv against this file. Regenerate it with \`bash scripts/update_constraints.sh\` (written by that"
  echo "# script from \`pip freeze --all --exclude-editable\` of a fresh unconstrained install, pip and"
  echo "# setuptools included; do not edit by hand)."
  "$tmp/venv/bin/python" -m pip freeze --all --exclude-editable
} >constraints.txt.new
mv constraints.txt.new constraints.txt
echo "==> constraints.txt: $(grep -vc '^#' constraints.txt) packages pinned; git diff constraints.txt shows what moved"
