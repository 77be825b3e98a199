"""Run the whole pipeline headless through Dagster, on a persistent local instance:

    python -m agent_health_dagster.headless [--agents demo@v1,demo@v2] [--dagster-home PATH]

Registers the partitions (the same sync the sensors do), materializes every suite for the given
agent versions (one run per suite), then refreshes everything downstream (metrics, insights,
rollups with their checks, the comparison and the leaderboard: one run per version);
prints the leaderboard, the comparison and the asset checks, and how to open the Dagster UI on
the same instance. Exit 0 when every check passed, 1 when a check failed, 2 on a usage or
configuration error."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from dagster import (
    AddDynamicPartitionsRequest,
    AssetCheckSeverity,
    AssetKey,
    DagsterInstance,
    DagsterRunStatus,
    RunsFilter,
)

from agent_health.errors import AgentHealthError
from agent_health_dagster.dagster_env import apply_dagster_env, dagster_env
from agent_health_dagster.defs.automation import sync_agent_versions, sync_eval_files
from agent_health_dagster.defs.build import build_pipeline, run_limit_seconds
from agent_health_dagster.defs.partitions import PARTITION_TAG, contiguous_blocks, range_tags

DEFAULT_HOME = Path(".agent_health") / "dagster_home"


# Run monitoring (the daemon's; `dagster dev` runs one) ends runs that can no longer finish: a run
# stuck starting or cancelling, and a STARTED run past its maximum runtime -- which is what becomes
# of a run whose worker was killed (SIGKILL, OOM, a lost machine) when no code server saw it die: a
# headless or CLI run, a restarted `dagster dev`, a step on a Celery worker that died. The limit is
# sized from what an evaluation run can take (`build.run_limit_seconds`, $AGENT_HEALTH_MAX_RUN_SECONDS
# over it); a single run may set a tighter one with the `dagster/max_runtime` tag (seconds). The
# pool slots a dead step still holds are freed FREE_SLOTS_S after its run ended (a step ending
# normally frees its own at once); RUN_RETRIES then starts the run again. deploy/postgres/dagster.yaml
# carries the same values (tests/deploy/test_postgres_instance.py holds them equal).
FREE_SLOTS_S = 60
RUN_MONITORING = {
    "enabled": True,
    "start_timeout_seconds": 180,
    "cancel_timeout_seconds": 180,
    "max_resume_run_attempts": 0,
    "poll_interval_seconds": 30,
    "free_slots_after_run_end_seconds": FREE_SLOTS_S,
}


# Automation that holds on a small, busy machine: a run the daemon could not start because the code
# server did not answer in time is dequeued again (RUN_QUEUE) rather than failed, a run whose
# worker crashed or could not start is retried (RUN_RETRIES: not a run whose step failed, which a
# retry would only repeat), and a code server gets time to load (CODE_SERVERS). deploy/postgres/
# dagster.yaml carries the same values; deploy/dagster.env raises Dagster's gRPC timeout.
# Runs of one partition (a refresh of one agent version, one result) wait for each other in the
# queue, in the order they were created (PARTITION_TAG: Dagster's tag of a one-partition run): a
# check's status on a version is that of the run planned last, so two refreshes of a version
# that overlapped could leave it showing neither (docs/dagster.md#checks-and-the-partition-they-belong-to).
ONE_RUN_PER_PARTITION = {"key": PARTITION_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
RUN_QUEUE = {
    "max_user_code_failure_retries": 3,
    "user_code_failure_retry_delay": 30,
    "tag_concurrency_limits": [ONE_RUN_PER_PARTITION],
}
RUN_RETRIES = {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}
CODE_SERVERS = {"local_startup_timeout": 360, "reload_timeout": 360}


def instance_yaml(run_monitoring: dict[str, Any] | None = None, run_queue: dict[str, Any] | None = None) -> str:
    """dagster.yaml for a local SQLite instance: no telemetry (offline), run monitoring on with a
    maximum runtime sized from the project's run settings ($AGENT_HEALTH_MAX_RUN_SECONDS over it)
    and slots freed after a run's end, runs dequeued again and retried when user code did not
    answer or a worker died, code servers given time to load."""
    settings: dict[str, Any] = {**RUN_MONITORING, "max_runtime_seconds": run_limit_seconds(lenient=True)}
    settings.update(run_monitoring or {})
    text: str = yaml.safe_dump(  # PyYAML ships no stubs: typed here
        {
            "telemetry": {"enabled": False},
            "run_monitoring": settings,
            "run_queue": {**RUN_QUEUE, **(run_queue or {})},
            "run_retries": RUN_RETRIES,
            "code_servers": CODE_SERVERS,
        },
        sort_keys=False,
    )
    return text


def prepare_home(path: Path) -> Path:
    """Create DAGSTER_HOME (SQLite storage) unless it has a dagster.yaml, and point Dagster at it."""
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    instance_file = path / "dagster.yaml"
    if not instance_file.exists():
        instance_file.write_text(instance_yaml())
    os.environ["DAGSTER_HOME"] = str(path)
    return path


def apply_sensor_result(instance: Any, result: Any) -> None:
    """Apply a SensorResult's partition changes and observations directly (no daemon)."""
    for req in result.dynamic_partitions_requests or ():
        if isinstance(req, AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        else:
            for key in req.partition_keys:
                instance.delete_dynamic_partition(req.partitions_def_name, key)
    for event in result.asset_events or ():
        instance.report_runless_asset_event(event)


def register(instance: Any, pipeline: Any, cursor_file: Path | None = None) -> list[str]:
    """Register agent versions and test partitions; returns the problems the eval sync found.
    `cursor_file` keeps the hashes seen last time (as the sensors keep theirs)."""
    saved = json.loads(cursor_file.read_text()) if cursor_file and cursor_file.is_file() else {}
    ns = pipeline.namespace
    agents = sync_agent_versions(instance, pipeline.project, pipeline.suites, saved.get("agents"), ns)
    apply_sensor_result(instance, agents)
    result, problems = sync_eval_files(instance, pipeline.project, pipeline.suites, saved.get("evals", {}), ns=ns)
    apply_sensor_result(instance, result)
    if cursor_file:
        cursor_file.write_text(
            json.dumps({"agents": json.loads(agents.cursor or "{}"), "evals": json.loads(result.cursor or "{}")})
        )
    return problems


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _check(result: Any, what: str) -> None:
    if not result.success:
        failures = [e.message for e in result.all_events if e.is_failure]
        raise SystemExit(f"agent-health: {what} failed: {failures[-1] if failures else 'see the Dagster run logs'}")


def materialize_all(instance: Any, pipeline: Any, agents: Sequence[str]) -> list[Any]:
    """Evaluate every suite for `agents` (one run per suite and block of contiguous versions, or
    runs of at most the suite's partitions per run), then refresh what follows (every suite's
    metrics, insights and rollup with its checks, the comparisons, the leaderboard: one run per
    version). Says what it is doing as it goes; returns the check evaluations of the refresh."""
    defs = pipeline.defs
    order = list(instance.get_dynamic_partitions(pipeline.namespace.agent_versions))
    agent_blocks = contiguous_blocks(order, agents)
    for s in pipeline.suites:
        tests = s.test_keys(instance)
        if not tests:
            print(f"  {s.suite}: no tests (skipped)", flush=True)
            continue
        for block in agent_blocks:
            print(f"  {s.suite}: evaluating {len(tests)} test(s) x {len(block)} version(s) ...", end="", flush=True)
            start = time.perf_counter()
            runs = []
            for versions, chunk in s.run_ranges(block, tests):
                result = defs.resolve_job_def(s.names.job).execute_in_process(
                    instance=instance, tags=range_tags(versions, chunk), run_config=QUIET, raise_on_error=False
                )
                _check(result, f"evaluating {s.suite}")
                runs.append(result.run_id[:8])
            print(f" {time.perf_counter() - start:.1f}s ({'run' if len(runs) == 1 else 'runs'} {', '.join(runs)})")
    evaluations: list[Any] = []
    for agent in [a for block in agent_blocks for a in block]:  # one version per run, as the refresh sensor
        print(f"  refreshing rollups, comparison and leaderboard for {agent} ...", end="", flush=True)
        start = time.perf_counter()
        wait_for_runs_of(instance, agent)
        run = defs.resolve_job_def(pipeline.namespace.refresh_job).execute_in_process(
            instance=instance, partition_key=agent, run_config=QUIET, raise_on_error=False
        )
        _check(run, f"refreshing {agent}")
        evaluations += run.get_asset_check_evaluations()
        print(f" {time.perf_counter() - start:.1f}s (run {run.run_id[:8]})")
    return evaluations


WAITING = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED)


IDLE_S = 20.0  # with no daemon, other runs of a version that show no progress this long are not waited for
NOTE_S = 60.0  # a wait with no progress says so this often
HEARTBEAT_S = 60.0  # a daemon heartbeats every 30 s; one heard from this recently (a beat missed) is taken to be alive


def daemon_alive(instance: Any, within_s: float = HEARTBEAT_S) -> bool:
    """Whether a Dagster daemon works on this instance (one of its heartbeats is under `within_s`
    old): it launches queued runs, and its run monitoring fails runs whose worker died."""
    now = time.time()
    return any(now - beat.timestamp < within_s for beat in instance.get_daemon_heartbeats().values())


def wait_for_runs_of(
    instance: Any,
    partition: str,
    poll_s: float = 1.0,
    idle_s: float = IDLE_S,
    alive: Callable[[Any], bool] = daemon_alive,
    note_s: float = NOTE_S,
) -> None:
    """Until no other run of `partition` is queued or going: this process's runs do not go through
    the queue, which runs one partition's runs in the order they were created (a daemon on the same
    instance may have created one). While a daemon is alive (`alive(instance)`), they are waited for
    however long they queue or start, up to the runs' time limit: the daemon starts them, and its run
    monitoring ends those that cannot finish; refreshing beside one would leave the version's checks
    with no status. With no daemon, runs that show no progress for `idle_s` (no new event, no new
    status, by the instance's record of them: say `dagster dev` was stopped after queueing them)
    are not waited for: the refresh goes ahead, and says so.
    A wait with no progress says so every `note_s`."""
    seen: dict[str, Any] = {}
    changed = noted = time.monotonic()
    limit_s = float(run_limit_seconds(lenient=True))
    filters = RunsFilter(tags={PARTITION_TAG: partition}, statuses=list(WAITING))
    while records := instance.get_run_records(filters, limit=20):
        progress = {r.dagster_run.run_id: _progress(instance, r) for r in records}
        now = {run_id: (status, event) for run_id, (status, event, _) in progress.items()}
        if now != seen:
            if not seen:
                print(f" (waiting for run {records[0].dagster_run.run_id[:8]} of {partition})", end="", flush=True)
            seen, changed = now, time.monotonic()
            noted = changed
        else:
            stalled_s = time.monotonic() - changed
            # a run that changed last before this job began watching (queued while `dagster dev` ran)
            # has been idle since then, by the instance's own record of it (SQLite keeps whole seconds)
            last = max(at for _, _, at in progress.values())
            idle_for_s = max(stalled_s, time.time() - last - 1.0)
            names = ", ".join(f"{rid[:8]} ({status.value})" for rid, (status, _) in now.items())
            why = None
            if idle_for_s > idle_s and not alive(instance):
                why = f"made no progress for {idle_for_s:.0f} s and no daemon works on this instance"
            elif stalled_s > limit_s:
                why = f"made no progress for {limit_s:.0f} s, the runs' time limit"
            if why:
                print(
                    f"\n  warning: run(s) {names} of {partition} {why}; refreshing anyway: if one runs "
                    "later, its checks show on the version once it ends",
                    flush=True,
                )
                return
            if time.monotonic() - noted >= note_s:
                noted = time.monotonic()
                print(
                    f"\n  still waiting for run(s) {names} of {partition}: no progress for {stalled_s:.0f} s, while "
                    "a daemon works on this instance (a pool or queue limit may hold them: `dagster instance "
                    "concurrency get --all`); Ctrl-C stops this job",
                    end="",
                    flush=True,
                )
        time.sleep(poll_s)


def _progress(instance: Any, record: Any) -> tuple[Any, int | None, float]:
    """A run's status, its newest event's storage id, and when it last changed (its status or a
    new event) in seconds since the epoch."""
    events = instance.get_records_for_run(record.dagster_run.run_id, limit=1, ascending=False).records
    changed = record.update_timestamp.timestamp()
    if not events:
        return record.dagster_run.status, None, changed
    return record.dagster_run.status, int(events[0].storage_id), max(changed, events[0].event_log_entry.timestamp)


def check_report(evaluations: Sequence[Any]) -> tuple[str, int]:
    """The asset checks as text (failed ones named with why), and how many failed as errors (a
    check that fails as a warning is said, and does not fail the command)."""
    failed = [e for e in evaluations if not e.passed and e.severity != AssetCheckSeverity.WARN]
    warned = [e for e in evaluations if not e.passed and e.severity == AssetCheckSeverity.WARN]
    lines = [f"Checks: {len(evaluations) - len(failed) - len(warned)} passed, {len(failed)} failed"]
    if warned:
        lines[0] += f", {len(warned)} warned"
    for label, group in (("FAILED", failed), ("WARNING", warned)):
        for e in group:
            where = "/".join(e.asset_key.path) + (f" @ {e.partition}" if e.partition else "")
            lines.append(f"  {label} {e.check_name} on {where}: {e.description or ''}".rstrip())
    return "\n".join(lines), len(failed)


def latest_table(
    instance: Any, key: list[str], field: str, partition: str | None = None, width: int | None = None
) -> str:
    """A table of the latest materialization as aligned text (for the terminal). With `width`,
    long cells are cut and the columns that do not fit are left out (and named), so no line wraps."""
    records = instance.fetch_materializations(AssetKey(key), limit=200).records
    record = next((r for r in records if partition is None or r.partition_key == partition), None)
    if record is None or record.asset_materialization is None:
        return "(not materialized)"
    value = record.asset_materialization.metadata.get(field)
    if value is None:
        return (
            "(no table: " + ", ".join(f"{k}={v.value}" for k, v in record.asset_materialization.metadata.items()) + ")"
        )
    columns = [c.name for c in value.schema.columns]
    rows = [[_cell(r.data.get(c)) for c in columns] for r in value.records]
    return text_table(columns, rows, width)


MAX_CELL = 48  # longer cells are cut with an ellipsis in the terminal


def text_table(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Aligned columns; with `width`, cells over MAX_CELL characters are cut and the rightmost
    columns that would make a line longer than `width` are left out, with a note naming them."""
    rows = [[c if len(c) <= MAX_CELL else c[: MAX_CELL - 1] + "…" for c in row] for row in rows]
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]
    shown = len(columns)
    if width:
        while shown > 1 and sum(widths[:shown]) + 2 * (shown - 1) > width:
            shown -= 1
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns[:shown], widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row[:shown], widths)).rstrip() for row in rows]
    if width and shown < len(columns):
        hidden = f"({len(columns) - shown} more column(s) not shown at {width} columns: "
        lines.append(text_fit(hidden + ", ".join(columns[shown:]), width - 1) + ")")
    return "\n".join(lines)


def text_fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent_health_dagster.headless", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--agents", default="demo@v1,demo@v2", help="Agent versions, oldest first (comma-separated).")
    parser.add_argument(
        "--dagster-home",
        default=os.environ.get("DAGSTER_HOME") or str(DEFAULT_HOME),
        help="Dagster instance folder (default $DAGSTER_HOME or .agent_health/dagster_home).",
    )
    parser.add_argument(
        "--instance-only", action="store_true", help="Only create the instance folder and its dagster.yaml."
    )
    parser.add_argument(
        "--run-limit",
        action="store_true",
        help="Only print the maximum runtime of a run (seconds) for this configuration and environment: "
        "max_runtime_seconds of a dagster.yaml (docs/deploy.md).",
    )
    args = parser.parse_args(argv)
    if args.run_limit:
        try:
            print(run_limit_seconds())
        except AgentHealthError as exc:
            print(f"agent-health: {exc}", file=sys.stderr)
            return 2
        return 0
    home = prepare_home(Path(args.dagster_home))
    if args.instance_only:
        print(home)
        return 0
    # This process creates and runs the runs itself: it runs with the deployment's Dagster settings.
    apply_dagster_env()

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
            print("  registering agent versions and test partitions ...", flush=True)
            for problem in register(instance, pipeline, home / "agent_health_sync.json"):
                print(f"  warning: {problem}", file=sys.stderr)
            evaluations = materialize_all(instance, pipeline, agents)
            width = shutil.get_terminal_size((120, 24)).columns
            print("\nLeaderboard\n" + latest_table(instance, ["benchmark", "leaderboard"], "leaderboard", width=width))
            if len(agents) > 1:
                print(
                    f"\nComparison ({agents[-1]} against its baseline)\n"
                    + latest_table(instance, ["benchmark", "comparison"], "comparison", agents[-1], width=width)
                )
    except AgentHealthError as exc:
        print(f"agent-health: {exc}", file=sys.stderr)
        return 2
    report, failed = check_report(evaluations)
    print("\n" + report)
    print(
        f"\nOpen the Dagster UI on the same instance (from {Path.cwd()}):\n"
        f"  {dev_command(home)}\n"
        "then browse http://127.0.0.1:3000 (Assets -> lineage, partitions, checks)."
    )
    if failed:
        print(f"agent-health: {failed} asset check(s) failed (exit 1); the pipeline itself ran", file=sys.stderr)
        return 1
    return 0


def dev_command(home: Path, checkout: Path | None = None) -> str:
    """The command that opens the Dagster UI (webserver, daemon, code server) on `home`, with the
    deployment's Dagster settings: scripts/dev.sh when this runs from the project checkout
    (`checkout`, default the folder above this package), else `dagster dev` on this package's
    module (an installed package has no workspace.yaml beside the user)."""
    script = (checkout or Path(__file__).resolve().parents[1]) / "scripts" / "dev.sh"
    if script.exists():
        return f"DAGSTER_HOME={home} bash {os.path.relpath(script)}"
    beside = Path(sys.executable).parent / "dagster"  # the dagster of this virtualenv, if that is where we run
    dagster_cli = os.path.relpath(beside) if beside.exists() else "dagster"
    settings = " ".join(f"{k}={v}" for k, v in dagster_env().items())
    return f"DAGSTER_HOME={home} {settings} {dagster_cli} dev -m agent_health_dagster.definitions"


if __name__ == "__main__":
    sys.exit(main())
