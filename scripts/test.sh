#!/usr/bin/env bash
# The whole test suite. Tests start the services they need (HTTP servers, OpenSearch, ...).
source "$(dirname "$0")/_venv.sh"
bash scripts/lint.sh
if [ -f scripts/services.sh ]; then
  bash scripts/services.sh
fi
exec .venv/bin/python -m pytest -q "$@"
