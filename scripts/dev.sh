#!/usr/bin/env bash
# The Dagster UI on the local instance: `dagster dev` (webserver, daemon and code server) on
# $DAGSTER_HOME (default .agent_health/dagster_home, created with the project's dagster.yaml if
# missing), with the Dagster settings of deploy/dagster.env for every process it starts (a value
# already in the environment wins). Extra arguments go to `dagster dev` (e.g. -p 3001; without
# -w/-f/-m it loads workspace.yaml).
source "$(dirname "$0")/_venv.sh"
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.agent_health/dagster_home}"
while IFS='=' read -r name value; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -z "${!name:-}" ]; then export "$name=$value"; fi
done < deploy/dagster.env
.venv/bin/python -m agent_health_dagster.headless --instance-only --dagster-home "$DAGSTER_HOME" >/dev/null
case " $* " in
  *" -w "* | *" --workspace "* | *" -f "* | *" -m "*) exec .venv/bin/dagster dev "$@" ;;
  *) exec .venv/bin/dagster dev -w workspace.yaml "$@" ;;
esac
