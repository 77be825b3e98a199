#!/usr/bin/env bash
# Lint, format check and type check, as CI runs them (scripts/test.sh calls this first).
source "$(dirname "$0")/_venv.sh"
echo "==> ruff check, ruff format --check, mypy"
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
.venv/bin/mypy --no-error-summary
