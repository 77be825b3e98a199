#!/usr/bin/env bash
# The whole test suite. Tests start the services they need (HTTP servers, OpenSearch, ...).
source "$(dirname "$0")/_venv.sh"
bash scripts/lint.sh
if [ -f scripts/services.sh ]; then
  bash scripts/services.sh
fi
# Parallel workers (pytest-xdist): half of the suite waits on services, `dagster dev` and deployments,
# so two workers on two cores fill that time. (Three, on a machine already busy, loaded it more than
# Dagster's daemon copes with: it launched a run twice.) Whole files go to a worker (a module's
# fixtures start once), files with slow tests first (tests/conftest.py), so the long ones start
# together. AGENT_HEALTH_TEST_WORKERS=0 runs in this one process.
exec .venv/bin/python -m pytest -q -n "${AGENT_HEALTH_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
