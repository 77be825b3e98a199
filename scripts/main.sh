#!/usr/bin/env bash
# The main job on embedded defaults: the whole Dagster pipeline, headless, on a local SQLite
# instance (.agent_health/dagster_home): every suite in evals/ for demo@v1 and demo@v2, the
# rollups, the leaderboard and the comparison. Extra arguments go to agent_health_dagster.headless.
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/python -m agent_health_dagster.headless "$@"
