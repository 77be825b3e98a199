# Sourced by the other scripts: create .venv once and install the project with its dev tools.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# The versions the suite was tested with: constraints.txt pins every dependency (see
# scripts/update_constraints.sh). The stamp covers both files, so a change to either reinstalls.
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "==> installing agent-health and its dependencies into .venv (first run takes a few minutes)"
  log=.venv/install.log
  if ! { .venv/bin/python -m pip install -c constraints.txt --upgrade pip \
      && .venv/bin/python -m pip install -c constraints.txt -e '.[dev]'; } >"$log" 2>&1; then
    tail -n 40 "$log"; echo "install failed; full log in $log" >&2; exit 1
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
  echo "==> installed: run .venv/bin/agent-health, or activate the venv first (. .venv/bin/activate)"
fi
# Byte-compile the project's own modules (pip compiles the dependencies at install): an editable
# install leaves them to the first import, and where PYTHONDONTWRITEBYTECODE is set (many
# containers and CI images) Python never writes them, so every start compiled all of them again
# (about 0.1 s of CPU per CLI start measured; compileall writes whatever that variable says, and
# checks an up-to-date tree in 0.05 s).
.venv/bin/python -m compileall -q agent_health agent_health_dagster >/dev/null
