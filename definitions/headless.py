"""Run the whole pipeline headless through Dagster, on a persistent local instance:

    python -m definitions.headless [--agents demo@v1,demo@v2] [--dagster-home PATH]

Registers the partitions (the same sync the sensors do), materializes every suite for the given
agent versions (one run per suite), the rollups (one run per version), the leaderboard and the
comparison; prints both and how to open the Dagster UI on the same instance."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_HOME = Path(".agent_health") / "dagster_home"


def _installed() -> bool:
    """Whether this project is pip-installed, so every Dagster process can import `definitions`."""
    from importlib import metadata

    try:
        metadata.distribution("agent-health")
        return True
    except metadata.PackageNotFoundError:
        return False


def instance_yaml(home: Path, pooled: bool) -> str:
    """dagster.yaml for a local SQLite instance: no telemetry (offline), and when possible the
    event log that keeps its connections open (see definitions/storage.py; 4x less bookkeeping
    per partition)."""
    text = "telemetry:\n  enabled: false\n"
    if pooled:
        text += (
            "event_log_storage:\n  module: definitions.storage\n  class: PooledSqliteEventLogStorage\n"
            f"  config:\n    base_dir: {home / 'history' / 'runs'}\n"
        )
    return text


def prepare_home(path: Path, pooled: bool | None = None) -> Path:
    """Create DAGSTER_HOME (SQLite storage) unless it has a dagster.yaml, and point Dagster at it."""
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    yaml = path / "dagster.yaml"
    if not yaml.exists():
        yaml.write_text(instance_yaml(path, _installed() if pooled is None else pooled))
    os.environ["DAGSTER_HOME"] = str(path)
    return path


def apply_sensor_result(instance: Any, result: Any) -> None:
    """Apply a SensorResult's partition changes and observations directly (no daemon)."""
    from dagster import AddDynamicPartitionsRequest

    for req in result.dynamic_partitions_requests or ():
        if isinstance(req, AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        else:
            for key in req.partition_keys:
                instance.delete_dynamic_partition(req.partitions_def_name, key)
    for event in result.asset_events or ():
        instance.report_runless_asset_event(event)


def register(instance: Any, pipeline: Any) -> list[str]:
    """Register agent versions and test partitions; returns the problems the eval sync found."""
    from definitions.defs.automation import sync_agent_versions, sync_eval_files

    apply_sensor_result(instance, sync_agent_versions(instance, pipeline.project, pipeline.suites))
    result, problems = sync_eval_files(instance, pipeline.project, pipeline.suites, {})
    apply_sensor_result(instance, result)
    return problems


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _check(result: Any, what: str) -> None:
    if not result.success:
        failures = [e.message for e in result.all_events if e.is_failure]
        raise SystemExit(f"agent-health: {what} failed: {failures[-1] if failures else 'see the Dagster run logs'}")


def materialize_all(instance: Any, pipeline: Any, agents: Sequence[str]) -> None:
    """Evaluate every suite for `agents` (one run per suite), then rollups and the benchmark."""
    from dagster import RunConfig

    from definitions.defs.benchmark_assets import ComparisonConfig
    from definitions.defs.partitions import AGENT_VERSIONS, contiguous_blocks, range_tags

    defs = pipeline.defs
    order = list(instance.get_dynamic_partitions(AGENT_VERSIONS))
    agent_blocks = contiguous_blocks(order, agents)
    for s in pipeline.suites:
        tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
        if not tests:
            print(f"  {s.suite}: no tests (skipped)")
            continue
        for block in agent_blocks:
            start = time.perf_counter()
            result = defs.resolve_job_def(s.names.job).execute_in_process(
                instance=instance, tags=range_tags(block, tests), run_config=QUIET, raise_on_error=False
            )
            _check(result, f"evaluating {s.suite}")
            print(
                f"  {s.suite}: {len(tests)} test(s) x {len(block)} version(s) in "
                f"{time.perf_counter() - start:.1f}s (run {result.run_id[:8]})"
            )
    if pipeline.suites:
        for agent in agents:
            _check(
                defs.resolve_job_def("rollups").execute_in_process(
                    instance=instance, partition_key=agent, run_config=QUIET, raise_on_error=False
                ),
                f"rollups for {agent}",
            )
    baseline, candidate = (agents[-2], agents[-1]) if len(agents) >= 2 else (None, None)
    config = RunConfig(
        ops={"benchmark__comparison": ComparisonConfig(baseline=baseline, candidate=candidate)},
        loggers=QUIET["loggers"],
    )
    _check(
        defs.resolve_job_def("benchmark").execute_in_process(
            instance=instance, run_config=config, raise_on_error=False
        ),
        "leaderboard and comparison",
    )


def latest_markdown(instance: Any, key: list[str], field: str) -> str:
    from dagster import AssetKey

    event = instance.get_latest_materialization_event(AssetKey(key))
    if event is None or event.asset_materialization is None:
        return "(not materialized)"
    value = event.asset_materialization.metadata.get(field)
    return value.value if value is not None else "(no table)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m definitions.headless", description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="demo@v1,demo@v2", help="Agent versions, oldest first (comma-separated).")
    parser.add_argument(
        "--dagster-home",
        default=os.environ.get("DAGSTER_HOME") or str(DEFAULT_HOME),
        help="Dagster instance folder (default $DAGSTER_HOME or .agent_health/dagster_home).",
    )
    args = parser.parse_args(argv)
    home = prepare_home(Path(args.dagster_home))

    import warnings

    from dagster import BetaWarning, DagsterInstance

    warnings.filterwarnings("ignore", category=BetaWarning)  # backfill_policy, observable assets: known beta

    from agent_health.errors import AgentHealthError
    from definitions.defs.build import build_pipeline

    try:
        pipeline = build_pipeline()
        agents = [a.strip() for a in args.agents.split(",") if a.strip()]
        known = pipeline.project.config.agent_refs()
        unknown = [a for a in agents if a not in known]
        if unknown:
            print(
                f"agent-health: unknown agent version(s) {', '.join(unknown)}; configured: {', '.join(known)}",
                file=sys.stderr,
            )
            return 2
        print(f"Eval root {pipeline.project.eval_root}: {len(pipeline.suites)} suite(s); Dagster instance {home}")
        with DagsterInstance.get() as instance:
            for problem in register(instance, pipeline):
                print(f"  warning: {problem}", file=sys.stderr)
            materialize_all(instance, pipeline, agents)
            print("\nLeaderboard\n" + latest_markdown(instance, ["benchmark", "leaderboard"], "leaderboard"))
            print("\nComparison\n" + latest_markdown(instance, ["benchmark", "comparison"], "comparison"))
    except AgentHealthError as exc:
        print(f"agent-health: {exc}", file=sys.stderr)
        return 2
    beside = Path(sys.executable).parent / "dagster"  # the dagster of this virtualenv, if that is where we run
    dagster = os.path.relpath(beside) if beside.exists() else "dagster"
    print(
        f"\nOpen the Dagster UI on the same instance (from {Path.cwd()}):\n"
        f"  DAGSTER_HOME={home} {dagster} dev -w workspace.yaml\n"
        "then browse http://127.0.0.1:3000 (Assets -> lineage, partitions, checks)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
