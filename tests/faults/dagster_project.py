"""The Dagster code location of a fault test's project, in this process: its pipeline, a
temporary SQLite instance, its partitions registered as the sensors register them, and one
suite's evaluation run over every registered partition."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CONFIG = "from agent_health import define_config\nconfig = define_config()\n"


def pipeline_for(root: Path) -> Any:
    """The code location of the project at `root` (its agent_health_config.py; written with the
    defaults, the demo agent, when missing)."""
    from agent_health_dagster.defs.build import build_pipeline
    from agent_health_dagster.defs.resources import AgentHealthResource

    config = root / "agent_health_config.py"
    if not config.exists():
        config.write_text(CONFIG)
    return build_pipeline(AgentHealthResource(config_path=str(config)))


@contextmanager
def dagster_instance(root: Path) -> Iterator[Any]:
    from dagster import instance_for_test

    warnings.filterwarnings("ignore", module="dagster")
    home = root / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as instance:
        yield instance


def register(instance: Any, pipeline: Any) -> list[str]:
    """Register agent versions and test partitions as the sensors do; the problems they found."""
    from agent_health_dagster.headless import register as headless_register

    return list(headless_register(instance, pipeline))


def keys_of(instance: Any, pipeline: Any, suite: str) -> list[str]:
    s = next(s for s in pipeline.suites if s.suite == suite)
    return list(instance.get_dynamic_partitions(s.names.tests_partitions))


def evaluate(instance: Any, pipeline: Any, suite: str, agents: list[str], job: str = "") -> dict[str, dict[str, Any]]:
    """Materialize every registered test partition of `suite` for `agents` in one run of its
    evaluate job (as the headless job does), or of the job named `job` (`rejudge__<suite>`): each
    results partition the run materialized -> its metadata values. The run must succeed."""
    from agent_health_dagster.defs.partitions import range_tags
    from agent_health_dagster.headless import QUIET

    s = next(s for s in pipeline.suites if s.suite == suite)
    tests = keys_of(instance, pipeline, suite)
    result = pipeline.defs.resolve_job_def(job or s.names.job).execute_in_process(
        instance=instance, tags=range_tags(agents, tests), run_config=QUIET
    )
    assert result.success
    # A partition's outcome is what its page shows: the observation an evaluation run logs after
    # materializing it, or a rejudge run's materialization metadata (it logs no observation).
    out: dict[str, dict[str, Any]] = {}
    for record in instance.fetch_materializations(s.key("results"), limit=10_000).records:
        if record.run_id == result.run_id:
            meta = record.asset_materialization.metadata
            out[str(record.partition_key)] = {k: getattr(v, "value", v) for k, v in meta.items()}
    seen: set[str] = set()
    for record in instance.fetch_observations(s.key("results"), limit=10_000).records:  # newest first
        key = str(record.partition_key)
        if record.run_id == result.run_id and key in out and key not in seen:
            seen.add(key)
            out[key] = {k: getattr(v, "value", v) for k, v in record.asset_observation.metadata.items()}
    return out
