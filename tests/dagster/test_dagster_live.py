"""The code location under a real `dagster dev` (webserver, daemon and code server on free local
ports), started once for this module the documented way (`scripts/dev.sh`):

- a backfill launched through the webserver's GraphQL API (what the UI's Launch backfill sends)
  materializes results, metrics and insights, and declarative automation then brings every rollup,
  the comparisons and the leaderboard up to date, with no other click (the time from launch to
  a fresh leaderboard is printed);
- failed and errored tests are visible per partition: the GraphQL API returns the partition
  statuses of the results' test_outcome check;
- the `dagster dev` log carries no BetaWarning, PreviewWarning or DeprecationWarning from this
  code location;
- a run whose process is killed with SIGKILL does not stay STARTED: the daemon's run monitoring,
  enabled by the instance configuration the project writes, marks it failed;
- the Dagster settings of deploy/dagster.env reach every process that reads them: the daemon and
  the webserver create runs that plan once per asset, and the run workers log them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from agent_health_dagster.dagster_env import DAGSTER_ENV
from agent_health_dagster.defs.partitions import range_tags
from tests.dagster.planned_events import planned_events, worker_settings
from tests.evalkit import write_evals
from tests.support import free_port, skip_or_fail

pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SLOW_AGENT = """
import os, time
from pathlib import Path

def run(request):
    Path(os.environ["AH_PID_FILE"]).write_text(str(os.getpid()))
    time.sleep(300)
    return {"answer": "never"}
"""

CONFIG = """
from agent_health import AgentSpec, define_config
config = define_config(agents=[
    AgentSpec(key="slow", connector="python", settings={"function": "slow_agent:run"}, versions={"v1": {}}),
])
"""

SLOW_EVAL = """
from agent_health import test

@test("waits", prompt="wait for it")
async def waits(agent):
    await agent.run()
"""


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        data = json.loads(resp.read())
    assert "errors" not in data, data
    return data["data"]


def wait_for(predicate, timeout: float, what: str, proc=None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"dagster dev exited ({proc.returncode}):\n{log.read_text()[-4000:] if log else ''}")
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    tail = log.read_text()[-4000:] if log else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{tail}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if shutil.which("dagster", path=str(Path(sys.executable).parent)) is None:
        skip_or_fail("the dagster CLI is not installed next to the Python interpreter")
    root = tmp_path_factory.mktemp("live")
    write_evals(root)
    (root / "evals" / "slow.eval.py").write_text(SLOW_EVAL)
    (root / "slow_agent.py").write_text(textwrap.dedent(SLOW_AGENT))
    (root / "agent_health_config.py").write_text(CONFIG)
    home = root / "home"
    home.mkdir()
    from agent_health_dagster.headless import instance_yaml

    (home / "dagster.yaml").write_text(instance_yaml({"poll_interval_seconds": 1}))
    env = {
        # the Dagster settings must come from scripts/dev.sh, not from the test's environment
        **{k: v for k, v in os.environ.items() if k not in DAGSTER_ENV},
        "DAGSTER_HOME": str(home),
        "AGENT_HEALTH_CONFIG": str(root / "agent_health_config.py"),
        "AGENT_HEALTH_SENSOR_INTERVAL_S": "2",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]),
        "PYTHONWARNINGS": "default",  # show every warning, so the log test sees them
    }
    # the partitions, as the sensors register them (so the sensors have nothing to request)
    from dagster import DagsterInstance

    from agent_health_dagster.defs.build import build_pipeline
    from agent_health_dagster.defs.resources import AgentHealthResource
    from agent_health_dagster.headless import register

    pipeline = build_pipeline(AgentHealthResource(config_path=str(root / "agent_health_config.py")))
    with DagsterInstance.from_config(str(home)) as instance:
        register(instance, pipeline)
    workspace = root / "workspace.yaml"
    workspace.write_text(
        (ROOT / "workspace.yaml").read_text().replace("working_directory: .", f"working_directory: {ROOT}")
    )
    port = free_port()
    log = root / "dagster-dev.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "dev.sh"), "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the webserver, daemon and code server go together
        )

    def up():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                return True
        except OSError:
            return False

    try:
        wait_for(up, 180, "the webserver", proc, log)
        yield {"port": port, "home": home, "root": root, "env": env, "log": log, "proc": proc, "pipeline": pipeline}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


QUERY = """{
  assetNodes { assetKey { path } groupName partitionDefinition { type dimensionTypes { name
    dynamicPartitionsDefinitionName } } }
  assetNodeOrError(assetKey: {path: ["rca", "payments", "results"]}) {
    ... on AssetNode { partitionKeysByDimension { name partitionKeys } } }
}"""


def test_webserver_serves_asset_graph_and_partitions(live):
    data = graphql(live["port"], QUERY)
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert {
        "rca/payments/cases",
        "rca/payments/results",
        "rca/payments/metrics",
        "rca/payments/rollup",
        "smoke_checks/results",
        "agents/settings",
        "benchmark/leaderboard",
        "benchmark/comparison",
    } <= set(nodes)
    results = nodes["rca/payments/results"]
    assert results["groupName"] == "suite_rca__payments"
    dims = {d["name"]: d["dynamicPartitionsDefinitionName"] for d in results["partitionDefinition"]["dimensionTypes"]}
    assert dims == {"agent": "agent_versions", "test": "tests__rca__payments"}
    keys = {d["name"]: d["partitionKeys"] for d in data["assetNodeOrError"]["partitionKeysByDimension"]}
    assert keys == {
        "agent": ["demo@v1", "demo@v2", "slow@v1"],
        "test": ["rca/payments::payment-rca-finds-the-database", "rca/payments::checkout-latency"],
    }


LAUNCH = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}"""

CHECK_STATUS = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks {
          checks {
            name
            partitionStatuses {
              __typename
              ... on AssetCheckMultiPartitionStatuses {
                ranges {
                  primaryDimStartKey primaryDimEndKey
                  secondaryDim {
                    ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}"""


def latest_after(instance, key, since: float, partition: str | None = None):
    from dagster import AssetKey

    records = instance.fetch_materializations(AssetKey(key), limit=100).records
    return any(r.timestamp >= since and (partition is None or r.partition_key == partition) for r in records)


def test_backfill_through_graphql_then_automation_makes_rollups_and_leaderboard_fresh(live):
    from dagster import DagsterInstance

    pipeline = live["pipeline"]
    suites = [s for s in pipeline.suites if s.suite != "slow"]
    agents = ["demo@v1", "demo@v2"]
    with DagsterInstance.from_config(str(live["home"])) as instance:
        launched = time.time()
        for s in suites:
            tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
            params = {
                "assetSelection": [{"path": k.path} for k in s.evaluate_keys],
                "partitionNames": [f"{a}|{t}" for a in agents for t in tests],
                "fromFailure": False,
            }
            answer = graphql(live["port"], LAUNCH, {"params": params})["launchPartitionBackfill"]
            assert answer["__typename"] == "LaunchBackfillSuccess", answer

        def all_fresh():
            rollups = all(
                latest_after(instance, [*s.names.prefix, "rollup"], launched, a) for s in suites for a in agents
            )
            return rollups and latest_after(instance, ["benchmark", "leaderboard"], launched)

        wait_for(all_fresh, 420, "fresh rollups and leaderboard", live["proc"], live["log"])
        elapsed = time.time() - launched

        # the leaderboard that came out counts both versions
        from dagster import AssetKey

        board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"]))
        totals = {r.data["agent"] for r in board.asset_materialization.metadata["leaderboard"].records}
        assert {"demo@v1", "demo@v2"} <= totals
        print(f"\nbackfill launch -> fresh rollups and leaderboard under the daemon: {elapsed:.1f} s")
        wait_for(
            lambda: all(latest_after(instance, ["benchmark", "comparison"], launched, a) for a in agents),
            120,
            "the comparisons",
            live["proc"],
            live["log"],
        )
        # The daemon created the backfill's runs with scripts/dev.sh's settings: one planned event
        # per asset and run (not per partition), and each run worker wrote its events with them.
        evaluated = {k for s in suites for k in s.evaluate_keys}
        backfill_runs = [r for r in instance.get_runs() if r.tags.get("dagster/backfill")]
        planned = {r.run_id: planned_events(instance, r.run_id) for r in backfill_runs}
        evaluations = [r for r in backfill_runs if {k for k, _, _ in planned[r.run_id]} & evaluated]
        # (how many runs a backfill makes is the daemon's business; every step is covered)
        assert {k for r in evaluations for k, _, _ in planned[r.run_id]} == evaluated
        for run in evaluations:
            assert len(planned[run.run_id]) == 3, planned[run.run_id]
            assert all(p is None and n >= 1 for _, p, n in planned[run.run_id]), planned[run.run_id]
            [line] = worker_settings(instance, run.run_id)
            assert all(f"{k}={v}" in line for k, v in DAGSTER_ENV.items()), line

    # failed and errored tests at a glance: the per-partition statuses of the test_outcome check
    data = graphql(live["port"], CHECK_STATUS, {"key": {"path": ["rca", "payments", "results"]}})
    checks = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    [outcome] = [c for c in checks if c["name"] == "test_outcome"]
    statuses = outcome["partitionStatuses"]
    assert statuses["__typename"] == "AssetCheckMultiPartitionStatuses"
    failed, succeeded = set(), set()
    for r in statuses["ranges"]:
        assert r["primaryDimStartKey"] == r["primaryDimEndKey"] or True
        dims = r["secondaryDim"]
        for p in dims["failedPartitions"]:
            failed.add((r["primaryDimStartKey"], p))
        for p in dims["succeededPartitions"]:
            succeeded.add((r["primaryDimStartKey"], p))
    keys = {k for r in statuses["ranges"] for k in (r["primaryDimStartKey"], r["primaryDimEndKey"])}
    assert keys <= {"demo@v1", "demo@v2", "slow@v1"}
    assert any(t == "rca/payments::checkout-latency" for _, t in failed), statuses
    assert any(t == "rca/payments::payment-rca-finds-the-database" for _, t in succeeded), statuses


LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""


def test_a_run_launched_from_the_webserver_plans_once_per_asset(live):
    """The UI's Materialize of a partition range: the webserver creates the run, with the
    settings scripts/dev.sh gave it."""
    from dagster import DagsterInstance

    suite = next(s for s in live["pipeline"].suites if s.suite == "rca/payments")
    with DagsterInstance.from_config(str(live["home"])) as instance:
        tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
        tags = range_tags(["demo@v1"], tests)
        params = {
            "selector": {
                "repositoryLocationName": "agent_health",
                "repositoryName": "__repository__",
                "jobName": suite.names.job,
            },
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
        }
        answer = graphql(live["port"], LAUNCH_RUN, {"params": params})["launchRun"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        run_id = answer["run"]["runId"]
        planned = planned_events(instance, run_id)
        assert sorted(planned) == sorted((k, None, len(tests)) for k in suite.evaluate_keys), planned
        wait_for(lambda: instance.get_run_by_id(run_id).is_finished, 180, "the launched run", live["proc"], live["log"])
        assert instance.get_run_by_id(run_id).is_success
        [line] = worker_settings(instance, run_id)
        assert all(f"{k}={v}" in line for k, v in DAGSTER_ENV.items()), line


def test_no_beta_or_deprecation_warning_from_this_code_location(live):
    text = live["log"].read_text()
    lines = [
        line
        for line in text.splitlines()
        if re.search(r"(Beta|Preview|Deprecation)Warning", line)
        and re.search(r"agent_health_dagster/|agent_health/", line)
    ]
    assert lines == [], "\n".join(lines[:20])


def test_a_run_killed_with_sigkill_is_marked_failed_by_run_monitoring(live):
    """A run process killed with SIGKILL, with no code server watching it (a headless or CLI run):
    the daemon's run monitoring ends it at its maximum runtime instead of leaving it STARTED."""
    from dagster import DagsterInstance, DagsterRunStatus

    pid_file = live["root"] / "agent.pid"
    script = textwrap.dedent(
        """
        import warnings
        warnings.filterwarnings("ignore")
        from dagster import DagsterInstance
        from agent_health_dagster.defs.build import build_pipeline
        pipeline = build_pipeline()
        s = next(x for x in pipeline.suites if x.suite == "slow")
        with DagsterInstance.get() as instance:
            pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
                instance=instance, partition_key="slow@v1|slow::waits", tags={"dagster/max_runtime": "5"})
        """
    )
    env = {**live["env"], "AH_PID_FILE": str(pid_file)}
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=live["root"], env=env)
    try:
        wait_for(pid_file.exists, 120, "the agent to start in the run process")
        assert int(pid_file.read_text()) == proc.pid  # the agent runs inside the run's own process
        with DagsterInstance.from_config(str(live["home"])) as instance:
            [run] = [r for r in instance.get_runs() if r.tags.get("dagster/max_runtime") == "5"]
            assert run.status == DagsterRunStatus.STARTED
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL

            def failed():
                current = instance.get_run_by_id(run.run_id)
                return current.status == DagsterRunStatus.FAILURE

            wait_for(failed, 120, "run monitoring to mark the killed run failed", live["proc"], live["log"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
