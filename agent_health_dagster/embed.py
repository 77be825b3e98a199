"""agent-health inside a team's own Dagster project: the Definitions of one eval root, named
under a prefix of its own so that several of them, and the team's own assets, merge into one code
location (docs/dagster.md#add-agent-health-to-your-own-dagster-project)."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from typing import Any

from dagster import Definitions, ExecutorDefinition

from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.defs.namespace import Namespace
from agent_health_dagster.defs.resources import AgentHealthResource, resource_from_env


def _path(value: str | PathLike[str] | None) -> str | None:
    return None if value is None else str(value)


def agent_health_resource(
    eval_root: str | PathLike[str] | None = None,
    config_path: str | PathLike[str] | None = None,
    state_dir: str | PathLike[str] | None = None,
    resource: AgentHealthResource | None = None,
) -> AgentHealthResource:
    """The resource of one eval root: `resource` (default: the one the environment configures, as
    the code location's) with the eval root, configuration file and state folder given here."""
    base = resource or resource_from_env()
    fields = {name: getattr(base, name) for name in type(base).model_fields}
    given = {"eval_root": _path(eval_root), "config_path": _path(config_path), "state_dir": _path(state_dir)}
    fields.update({name: value for name, value in given.items() if value is not None})
    return type(base)(**fields)


def agent_health_definitions(
    eval_root: str | PathLike[str] | None = None,
    *,
    config_path: str | PathLike[str] | None = None,
    state_dir: str | PathLike[str] | None = None,
    prefix: str = "",
    executor: ExecutorDefinition | None = None,
    resources: Mapping[str, Any] | None = None,
    resource: AgentHealthResource | None = None,
) -> Definitions:
    """The Dagster definitions of one eval root: per suite its assets, checks, evaluate and rejudge
    jobs and nightly schedule, the benchmark and judge assets, the sensors and the jobs they start.

    - `eval_root`, `config_path`, `state_dir`: where the eval files, the configuration file
      (`agent_health_config.py`) and the results are; unset, they are found as the CLI finds them
      (the configuration file names the eval root and state folder).
    - `prefix` (letters, digits, underscores): the first part of every asset key
      (`<prefix>/<suite>/results`, `<prefix>/benchmark/leaderboard`); in every other name it
      stands before the suite (`evaluate__<prefix>__<suite>`, `tests__<prefix>__<suite>`) or, for
      what the eval root has once, first (`<prefix>__refresh`, `<prefix>__eval_files_sensor`,
      `<prefix>__agent_versions`, the resource key `<prefix>__agent_health`). Give each eval root
      its own prefix and their Definitions, and the team's, merge with `dagster.Definitions.merge`
      without a collision. "" (the default) gives the names of agent-health's own code location.
    - `executor`: the executor of these jobs (None: the one of the Definitions they are merged
      into, else Dagster's default). Give every eval root the same executor object.
    - `resources`: more resources, under their keys, beside agent-health's own.
    - `resource`: agent-health's settings (thresholds, baseline, run settings; default: from the
      environment), with `eval_root`, `config_path` and `state_dir` applied over it.

    Every job of one eval root runs in the same Dagster pool (`agent_health_agents`) as the
    others: one concurrency limit for the calls to agents, whichever eval root makes them."""
    namespace = Namespace(prefix)
    pipeline = build_pipeline(
        agent_health_resource(eval_root, config_path, state_dir, resource),
        namespace=namespace,
        executor=executor,
        resources=dict(resources or {}),
    )
    return pipeline.defs
