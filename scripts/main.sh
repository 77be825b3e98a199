#!/usr/bin/env bash
# The main job on embedded defaults: the demo evals against demo@v1 and demo@v2.
source "$(dirname "$0")/_venv.sh"
if [ -f definitions/headless.py ]; then
  exec .venv/bin/python -m definitions.headless "$@"
fi
exec .venv/bin/agent-health run evals --agent demo@v1 --agent demo@v2 "$@"
