"""The code location under a real `dagster dev` (webserver, daemon and code server on free local
ports), started once for this module the documented way (`scripts/dev.sh`):

- a backfill launched through the webserver's GraphQL API (what the UI's Launch backfill sends)
  materializes the results, and the refresh sensor then brings every rollup, the comparisons and
  the leaderboard up to date, with no other click (the time from launch to a fresh leaderboard is
  printed);
- each results partition a person clicks says how its test ended (status, why, tokens, cost), read
  through the GraphQL API the UI reads;
- rollup checks name their agent version however the run was launched (the UI's Materialize, a
  backfill, the refresh sensor, the headless job);
- one edit to an eval file: the results show stale, the rollup, comparison and leaderboard say they
  are out of date until the rerun, then are fresh, after exactly one downstream run;
- a new agent version in the configuration ends fully materialized with no click, even when the
  code server stalls past its timeout as the runs are launched; a version added by hand in the
  launch dialog is gone after the sensor's next tick;
- the `dagster dev` log carries no BetaWarning, PreviewWarning or DeprecationWarning from this
  code location;
- a run whose process is killed with SIGKILL does not stay STARTED: the daemon's run monitoring,
  enabled by the instance configuration the project writes, marks it failed;
- the Dagster settings of deploy/dagster.env reach every process that reads them: the daemon and
  the webserver create runs that plan once per asset, and the run workers log them.
"""

from __future__ import annotations

import itertools
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
from tests.support.dagster_plan import DAGSTER
from tests.support.timing import load_factor, scaled

pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SLOW_AGENT = """
import os, time
from pathlib import Path

def run(request):
    if "wait for it" not in str(request):  # only the slow suite's test waits
        return {"output": "the payment-service cannot reach db-primary", "tool_calls": []}
    Path(os.environ["AH_PID_FILE"]).write_text(str(os.getpid()))
    time.sleep(300)
    return {"answer": "never"}
"""

CONFIG = """
from agent_health import AgentSpec, define_config
config = define_config(agents=[
    AgentSpec(key="slow", connector="python", settings={"function": "slow_agent:run"}, versions={"v1": {}}),
    AgentSpec(key="count", connector="http", settings={"endpoint": "%(count_url)s"}, versions={"v1": {}}),
])
"""

# The demo agent answers by its version's name: v1 gets DNS right, v2 blames the network, so
# demo@v2 regresses here (its rollup's no_regression and pass_rate_threshold fail on demo@v2).
DNS_EVAL = """tests:
  - name: dns outage
    prompt: Users cannot resolve api.example.com. Why?
    expected_outcomes: [identifies DNS as the root cause]
"""

# The counting agent's suite (count@v1): each test's prompt names it.
COUNTED = 6
COUNTED_EVAL = "tests:\n" + "".join(f"  - name: counted {i}\n    prompt: count {i}\n" for i in range(1, COUNTED + 1))


class CountingAgent:
    """An HTTP agent on 127.0.0.1 that counts the requests for each prompt `count N`, answers at
    once, and holds the prompts in `hold` until `release` is set."""

    def __init__(self):
        import threading
        from collections import Counter

        from tests.support import LocalHTTPServer, QuietHandler

        self.counts: Counter[str] = Counter()
        self.hold: set[str] = set()
        self.release = threading.Event()
        agent = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                prompt = str(body.get("prompt", ""))
                if prompt.startswith("count "):
                    agent.counts[prompt] += 1
                if prompt in agent.hold:
                    agent.release.wait(600)
                data = json.dumps({"output": f"answered {prompt}"}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the run that asked was killed

        self.server = LocalHTTPServer(Handler).start()


SLOW_EVAL = """
from agent_health import test

@test("waits", prompt="wait for it")
async def waits(agent):
    await agent.run()
"""


GRPC_TIMEOUT_S = 15
EXPECTED_ENV = {**DAGSTER_ENV, "DAGSTER_GRPC_TIMEOUT_SECONDS": str(GRPC_TIMEOUT_S)}


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
    started, written = time.monotonic(), timeout
    # written for the quiet development machine: stretched to this one, and further while parallel
    # workers load it more than when it was measured
    while time.monotonic() < started + (timeout := max(scaled(written), written * load_factor())):
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
    (root / "evals" / "dns.yaml").write_text(DNS_EVAL)
    (root / "evals" / "counted.yaml").write_text(COUNTED_EVAL)
    (root / "slow_agent.py").write_text(textwrap.dedent(SLOW_AGENT))
    counting = CountingAgent()
    (root / "agent_health_config.py").write_text(CONFIG % {"count_url": counting.server.url})
    home = root / "home"
    home.mkdir()
    from agent_health_dagster.headless import instance_yaml

    # retry a dequeue that could not reach the code server after 5 s, not 30 (the stall test)
    (home / "dagster.yaml").write_text(
        instance_yaml({"poll_interval_seconds": 1}, run_queue={"user_code_failure_retry_delay": 5})
    )
    env = {
        # the Dagster settings must come from scripts/dev.sh, not from the test's environment
        **{k: v for k, v in os.environ.items() if k not in DAGSTER_ENV},
        "DAGSTER_HOME": str(home),
        "AGENT_HEALTH_CONFIG": str(root / "agent_health_config.py"),
        "AGENT_HEALTH_SENSOR_INTERVAL_S": "2",
        # the tests launch what they evaluate: automation does not fill in every version's missing
        # results here (the slow agent's test would hold a run for minutes); tests/dagster/
        # test_dagster_automation.py covers that request
        "AGENT_HEALTH_EVALUATE_MISSING": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]),
        "PYTHONWARNINGS": "default",  # show every warning, so the log test sees them
        # a stalled code server is given up after 15 s here (180 s in deploy/dagster.env)
        "DAGSTER_GRPC_TIMEOUT_SECONDS": str(GRPC_TIMEOUT_S),
        "DAGSTER_REPOSITORY_GRPC_TIMEOUT_SECONDS": str(GRPC_TIMEOUT_S),  # (else at least 180 s)
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
        yield {
            "port": port,
            "home": home,
            "root": root,
            "env": env,
            "log": log,
            "proc": proc,
            "pipeline": pipeline,
            "counting": counting,
        }
    finally:
        counting.release.set()
        counting.server.close()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            # it stops in 2-3 s when idle; after this module's last test it did not stop within 30 s
            # (its daemon did, the webserver did not), so it is killed sooner: what it would still
            # write goes with the temporary instance
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        stop_servers_of(home)


def stop_servers_of(home: Path) -> None:
    """Stop the code servers of this instance that outlived `dagster dev`: one started for a code
    reload lives on in a process group of its own until its heartbeat times out (30-45 s)."""
    mine = str(home).encode()
    for _ in range(2):
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and mine in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
        for pid in found:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not found:
            return
        time.sleep(scaled(3))


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
        "agent": ["demo@v1", "demo@v2", "slow@v1", "count@v1"],
        "test": ["payment-rca-finds-the-database", "checkout-latency"],
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

# What the UI's partition panel reads (its AssetPartitionDetailQuery and AssetPartitionStaleQuery):
# the partition's events, newest first; it shows the newest materialization and the observations
# logged after it.
PARTITION_OUTCOMES = """
query($key: AssetKeyInput!, $partition: String!) {
  assetOrError(assetKey: $key) {
    ... on Asset {
      assetEventHistory(partitions: [$partition], limit: 1000,
                        eventTypeSelectors: [MATERIALIZATION, OBSERVATION, FAILED_TO_MATERIALIZE]) {
        results {
          __typename
          ... on MaterializationEvent { timestamp runId }
          ... on ObservationEvent {
            timestamp runId
            metadataEntries {
              label
              ... on TextMetadataEntry { text }
              ... on FloatMetadataEntry { floatValue }
              ... on IntMetadataEntry { intValue }
            }
          }
        }
      }
    }
  }
  assetNodeOrError(assetKey: $key) { ... on AssetNode { staleStatus(partition: $partition) } }
}"""


def partition_page(port: int, key: list[str], partition: str) -> dict:
    """One partition as its panel shows it: `materialized` (the newest materialization's run, or
    None), `outcome` (the metadata of the newest observation after it), `stale` (its stale status)."""
    data = graphql(port, PARTITION_OUTCOMES, {"key": {"path": key}, "partition": partition})
    events = sorted(data["assetOrError"]["assetEventHistory"]["results"], key=lambda e: -int(e["timestamp"]))
    mats = [e for e in events if e["__typename"] == "MaterializationEvent"]
    latest = mats[0] if mats else None
    after = [
        e
        for e in events
        if e["__typename"] == "ObservationEvent" and latest and int(e["timestamp"]) >= int(latest["timestamp"])
    ]
    outcome = {}
    for e in after[0]["metadataEntries"] if after else []:
        outcome[e["label"]] = e.get("text", e.get("floatValue", e.get("intValue")))
    return {
        "materialized": latest["runId"] if latest else None,
        "outcome": outcome,
        "stale": data["assetNodeOrError"]["staleStatus"],
    }


def partition_outcome(port: int, key: list[str], partition: str) -> dict:
    """How one partition's test ended, as its panel shows it."""
    return partition_page(port, key, partition)["outcome"]


def latest_after(instance, key, since: float, partition: str | None = None):
    from dagster import AssetKey

    records = instance.fetch_materializations(AssetKey(key), limit=100).records
    return any(r.timestamp >= since and (partition is None or r.partition_key == partition) for r in records)


def test_backfill_through_graphql_then_the_refresh_makes_rollups_and_leaderboard_fresh(live):
    from dagster import DagsterInstance

    pipeline = live["pipeline"]
    suites = [s for s in pipeline.suites if s.suite != "slow"]
    agents = ["demo@v1", "demo@v2"]
    with DagsterInstance.from_config(str(live["home"])) as instance:
        launched = time.time()
        for s in suites:
            tests = s.test_keys(instance)
            params = {
                "assetSelection": [{"path": s.key("results").path}],
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
        # (a version without results in some suite is marked in its cell: "demo@v1 (1 of 9 missing)")
        totals = {r.data["agent"].split()[0] for r in board.asset_materialization.metadata["leaderboard"].records}
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
        # per run (not per partition), and each run worker wrote its events with them.
        results = {s.key("results") for s in suites}
        backfill_runs = [r for r in instance.get_runs() if r.tags.get("dagster/backfill")]
        planned = {r.run_id: planned_events(instance, r.run_id) for r in backfill_runs}
        evaluations = [r for r in backfill_runs if {k for k, _, _ in planned[r.run_id]} & results]
        assert {k for r in evaluations for k, _, _ in planned[r.run_id]} == results
        for run in evaluations:
            assert len(planned[run.run_id]) == 1, planned[run.run_id]
            assert all(p is None and n >= 1 for _, p, n in planned[run.run_id]), planned[run.run_id]
            [line] = worker_settings(instance, run.run_id)
            assert all(f"{k}={v}" in line for k, v in EXPECTED_ENV.items()), line

    # what a person sees on a results partition: how its test ended, failed told apart from errored
    failed = partition_outcome(live["port"], ["rca", "payments", "results"], "demo@v1|checkout-latency")
    assert failed["status"] == "failed" and "query_metrics" in failed["failure"] and "error" not in failed
    assert failed["total_tokens"] > 0 and "cost_usd" in failed and failed["duration_ms"] > 0
    passed = partition_outcome(live["port"], ["rca", "payments", "results"], "demo@v2|payment-rca-finds-the-database")
    assert passed["status"] == "passed" and "failure" not in passed and passed["score"] > 0


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
        tests = suite.test_keys(instance)
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
        assert planned == [(suite.key("results"), None, len(tests))], planned
        wait_for(lambda: instance.get_run_by_id(run_id).is_finished, 180, "the launched run", live["proc"], live["log"])
        assert instance.get_run_by_id(run_id).is_success
        [line] = worker_settings(instance, run_id)
        assert all(f"{k}={v}" in line for k, v in EXPECTED_ENV.items()), line


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
                instance=instance, partition_key="slow@v1|waits", tags={"dagster/max_runtime": "5"})
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


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = [root]
    for pid in tree:
        tree.extend(child for child, parent in parents.items() if parent == pid)
    return tree


CONCURRENCY_CLAIMS = """
query($pool: String!) {
  instance { concurrencyLimit(concurrencyKey: $pool) { claimedSlots { runId stepKey } pendingSteps { runId } } }
}"""


def test_a_killed_run_worker_is_retried_and_records_what_it_stored_without_calling_the_agent_again(live):
    """A run launched from the webserver whose worker is killed (SIGKILL) mid-step, after three of
    six tests stored their results and with the fourth in flight: run monitoring ends the run as
    failed and frees its pool slot, the daemon retries it, and the retry records every partition,
    calling the agent only for the tests the killed run had not stored."""
    from dagster import DagsterInstance, DagsterRunStatus

    from agent_health.stores import ResultKey

    counting = live["counting"]
    held = "count 4"
    counting.hold = {held}
    counting.release.clear()
    pipeline = live["pipeline"]
    suite = next(s for s in pipeline.suites if s.suite == "counted")
    with DagsterInstance.from_config(str(live["home"])) as instance:
        tests = suite.test_keys(instance)
        assert len(tests) == COUNTED
        params = {
            "selector": {
                "repositoryLocationName": "agent_health",
                "repositoryName": "__repository__",
                "jobName": suite.names.job,
            },
            # one test at a time: the kill finds exactly three stored and one in flight
            "runConfigData": {"ops": {suite.names.step: {"config": {"concurrency": 1}}}},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in range_tags(["count@v1"], tests).items()]},
        }
        answer = graphql(live["port"], LAUNCH_RUN, {"params": params})["launchRun"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        run_id = answer["run"]["runId"]
        wait_for(lambda: counting.counts[held] >= 1, 240, "the fourth test's request", live["proc"], live["log"])
        store = pipeline.project.store

        def stored():
            return [t for t in tests if store.get(ResultKey("count@v1", "counted", f"counted::{t}")) is not None]

        # the third result reaches the store from the step's writer thread, which may still be
        # writing it when the fourth request arrives; the held fourth test is never stored
        wait_for(lambda: len(stored()) >= 3, 60, "the first three results stored", live["proc"], live["log"])
        assert stored() == tests[:3], stored()

        def worker_pid():
            for event in instance.all_logs(run_id):
                found = re.search(r"Started process for run \(pid: (\d+)\)", event.message or "")
                if found:
                    return int(found.group(1))
            return None

        # the worker dies with everything it started (the default executor runs the step in the
        # worker itself; `multiprocess`, in a child), as when its machine or pod goes away
        for pid in process_tree(wait_for(worker_pid, 60, "the run worker's pid")):
            os.kill(pid, signal.SIGKILL)

        def failed():
            return instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE

        wait_for(failed, 120, "run monitoring to end the killed run", live["proc"], live["log"])
        counting.release.set()  # the retry's requests are answered

        def retried():
            found = [r for r in instance.get_runs() if r.tags.get("dagster/parent_run_id") == run_id]
            return found if found and found[0].is_finished else None

        [retry] = wait_for(retried, 300, "the daemon's retry of the killed run", live["proc"], live["log"])
        assert retry.is_success, [e.message for e in instance.all_logs(retry.run_id)][-5:]
        assert any(
            "recorded without calling the agent again" in (e.message or "") for e in instance.all_logs(retry.run_id)
        )
        claims = graphql(live["port"], CONCURRENCY_CLAIMS, {"pool": "agent_health_agents"})
        held_by = [c for c in claims["instance"]["concurrencyLimit"]["claimedSlots"] if c["runId"] == run_id]
        assert held_by == [], held_by  # the dead run's slot was freed
    # every partition a person clicks shows how its test ended, recorded by the retry
    for t in tests:
        page = partition_page(live["port"], [*suite.names.prefix, "results"], f"count@v1|{t}")
        assert page["materialized"] == retry.run_id and page["outcome"]["status"] == "passed", (t, page)
    # the agent was called once per test, but for the one in flight when the worker died
    expected = {f"count {i}": 1 for i in range(1, COUNTED + 1)} | {held: 2}
    assert dict(counting.counts) == expected


CHECK_EXECUTIONS = """
query($key: AssetKeyInput!, $check: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $check, limit: 200) {
    runId partition status timestamp
    evaluation { success severity description partition }
  }
}"""


def check_executions(port: int, key: list[str], check: str) -> list[dict]:
    """Executions of one check, newest first, as the UI's check page reads them."""
    return graphql(port, CHECK_EXECUTIONS, {"key": {"path": key}, "check": check})["assetCheckExecutions"]


def wait_run(instance, run_id: str, live) -> None:
    wait_for(lambda: instance.get_run_by_id(run_id).is_finished, 240, f"run {run_id}", live["proc"], live["log"])
    assert instance.get_run_by_id(run_id).is_success, [e.message for e in instance.all_logs(run_id)][-5:]


ROLLUP_CHECK_NAMES = ("pass_rate_threshold", "errored_share_threshold", "no_regression")


# What a check's Partitions tab and the asset's overview read for a partitioned check.
CHECK_STATUSES = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { assetChecksOrError { ... on AssetChecks { checks {
    name
    partitionStatuses { __typename ... on AssetCheckDefaultPartitionStatuses {
      succeededPartitions failedPartitions inProgressPartitions skippedPartitions executionFailedPartitions } }
  } } } } }
}"""
STATUS_FIELDS = {
    "succeededPartitions": "succeeded",
    "failedPartitions": "failed",
    "inProgressPartitions": "in progress",
    "skippedPartitions": "skipped",
    "executionFailedPartitions": "execution failed",
}


def check_statuses(port: int, key: list[str], partitions=("demo@v1", "demo@v2")) -> dict[str, dict[str, str]]:
    """Per rollup check, the status of each of `partitions` ("missing" when it has none)."""
    data = graphql(port, CHECK_STATUSES, {"key": {"path": key}})
    out = {}
    for check in data["assetNodeOrError"]["assetChecksOrError"]["checks"]:
        if check["name"] not in ROLLUP_CHECK_NAMES:
            continue
        statuses = check["partitionStatuses"] or {}
        found = {p: label for field, label in STATUS_FIELDS.items() for p in statuses.get(field) or ()}
        out[check["name"]] = {p: found.get(p, "missing") for p in partitions}
    return out


# The rollup checks' status per version, whatever ran last: cases fails demo@v1's pass rate;
# dns regresses on demo@v2.
EXPECTED_CHECKS = {
    ("cases", "rollup"): {
        "pass_rate_threshold": {"demo@v1": "failed", "demo@v2": "succeeded"},
        "errored_share_threshold": {"demo@v1": "succeeded", "demo@v2": "succeeded"},
        "no_regression": {"demo@v1": "succeeded", "demo@v2": "succeeded"},
    },
    ("dns", "rollup"): {
        "pass_rate_threshold": {"demo@v1": "succeeded", "demo@v2": "failed"},
        "errored_share_threshold": {"demo@v1": "succeeded", "demo@v2": "succeeded"},
        "no_regression": {"demo@v1": "succeeded", "demo@v2": "failed"},
    },
}


SENSOR_TICKS = """{
  repositoryOrError(repositorySelector: {repositoryLocationName: "agent_health", repositoryName: "__repository__"}) {
    ... on Repository { sensors { name sensorState { status ticks(limit: 1) { timestamp status } } } } }
}"""


def wait_quiet(instance, live) -> None:
    """Until every run has finished and every running sensor has ended a tick that began after the
    last run changed (the refresh sensor followed what ran, and nothing else follows)."""

    def quiet():
        runs = instance.get_run_records()
        if not all(r.dagster_run.is_finished for r in runs):
            return False
        last = max((r.update_timestamp.timestamp() for r in runs), default=0)
        sensors = graphql(live["port"], SENSOR_TICKS)["repositoryOrError"]["sensors"]
        followed = all(
            (ticks := s["sensorState"]["ticks"]) and ticks[0]["timestamp"] > last and ticks[0]["status"] != "STARTED"
            for s in sensors
            if s["sensorState"]["status"] == "RUNNING"
        )
        seen = {r.dagster_run.run_id for r in runs}
        return followed and {r.run_id for r in instance.get_runs()} == seen  # no run created since

    wait_for(quiet, 300, "the instance to be quiet", live["proc"], live["log"])


def assert_check_statuses(live, after: str, said: str = "") -> None:
    """Once the runs that follow have finished (the refresh sensor follows every evaluation);
    `said`: what the launch printed, shown when a status is wrong."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(live["home"])) as instance:
        wait_quiet(instance, live)
    for key, expected in EXPECTED_CHECKS.items():
        assert check_statuses(live["port"], list(key)) == expected, (after, key, said[-3000:])


def test_every_launch_path_records_rollup_checks_on_their_version(live):
    """The headless job, a backfill of one version's rollups from the UI, and the refresh sensor
    after a UI Materialize of one result: each leaves every rollup check's status on each version's
    partition as the check's Partitions tab and the asset's overview read it (GraphQL
    `partitionStatuses`), failed where that version fails, whichever version ran last."""
    from dagster import DagsterInstance

    from agent_health_dagster.headless import daemon_alive

    runs: dict[str, list[str]] = {}
    with DagsterInstance.from_config(str(live["home"])) as instance:
        # so the headless refresh waits for the runs the daemon queued for a version, however long
        assert daemon_alive(instance)
    # the headless job on the same instance (every suite, both versions, one refresh run per version)
    headless = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_health_dagster.headless",
            "--agents",
            "demo@v1,demo@v2",
            "--dagster-home",
            str(live["home"]),
        ],
        cwd=live["root"],
        env=live["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert headless.returncode == 1 and "Checks:" in headless.stdout, headless.stderr[-3000:]
    assert "FAILED no_regression on dns/rollup @ demo@v2" in headless.stdout
    assert_check_statuses(live, "the headless job", headless.stdout)
    suites = {s.suite: s for s in live["pipeline"].suites}
    with DagsterInstance.from_config(str(live["home"])) as instance:
        runs["headless"] = [r.run_id for r in instance.get_runs() if r.job_name == "refresh"]
        # the UI's Materialize of demo@v1's rollups (metrics and insights come with them): a backfill,
        # one run per version; demo@v1 is now the version evaluated last
        params = {
            "assetSelection": [{"path": k.path} for name in ("cases", "dns") for k in suites[name].summary_keys],
            "partitionNames": ["demo@v1"],
            "fromFailure": False,
        }
        answer = graphql(live["port"], LAUNCH, {"params": params})["launchPartitionBackfill"]
        assert answer["__typename"] == "LaunchBackfillSuccess", answer
        backfill = answer["backfillId"]

        def backfill_runs():
            found = [r for r in instance.get_runs() if r.tags.get("dagster/backfill") == backfill]
            return found if found and all(r.is_finished for r in found) else None

        runs["backfill"] = [
            r.run_id for r in wait_for(backfill_runs, 240, "the rollup backfill", live["proc"], live["log"])
        ]
        assert_check_statuses(live, "a backfill of demo@v1")
        # the UI's Materialize of one results partition; the refresh sensor follows, for demo@v2
        dns = suites["dns"]
        before = {r.run_id for r in instance.get_runs()}
        params = {
            "selector": {
                "repositoryLocationName": "agent_health",
                "repositoryName": "__repository__",
                "jobName": dns.names.job,
            },
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "demo@v2|dns-outage"}]},
        }
        answer = graphql(live["port"], LAUNCH_RUN, {"params": params})["launchRun"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        wait_run(instance, answer["run"]["runId"], live)

        def refreshed():
            found = [
                r
                for r in instance.get_runs()
                if r.run_id not in before and r.tags.get("dagster/sensor_name") == "refresh_sensor"
            ]
            return found if found and all(r.is_finished for r in found) else None

        sensor_runs = wait_for(refreshed, 240, "the refresh sensor's run", live["proc"], live["log"])
        assert {r.tags.get("dagster/partition") for r in sensor_runs} == {"demo@v2"}  # one run, of that version
        runs["sensor"] = [r.run_id for r in sensor_runs]
        assert_check_statuses(live, "the refresh sensor")
    dns_rollup = [*dns.names.prefix, "rollup"]
    for name in ROLLUP_CHECK_NAMES:
        executions = check_executions(live["port"], dns_rollup, name)
        for path, ids in runs.items():
            mine = [e for e in executions if e["runId"] in ids]
            assert mine and all(e["partition"] and e["evaluation"]["partition"] == e["partition"] for e in mine), (
                name,
                path,
                mine,
            )


STALE = """
query($key: AssetKeyInput!, $partition: String!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { staleStatus(partition: $partition) } }
}"""


def test_one_edit_shows_out_of_date_until_rerun_then_fresh_after_one_downstream_run(live):
    from dagster import DagsterInstance

    port = live["port"]
    rca = live["root"] / "evals" / "rca" / "payments.eval.py"
    with DagsterInstance.from_config(str(live["home"])) as instance:
        wait_quiet(instance, live)
        before = {r.run_id for r in instance.get_runs()}
        results = ["rca", "payments", "results"]
        assert partition_page(port, results, "demo@v1|checkout-latency")["stale"] == "FRESH"
        concurrency(live, 0)  # the reruns the edit requests wait in the queue, so the stale state holds
        try:
            edited = time.time()
            rca.write_text(
                rca.read_text().replace('to_have_called_tool("query_metrics")', 'to_have_called_tool("get_metrics")')
            )

            def stale_partition():
                page = partition_page(port, results, "demo@v1|checkout-latency")
                return page if page["stale"] == "STALE" else None

            # what the partition's panel shows once the eval-files sensor reported the edit: stale,
            # with its outcome still there
            page = wait_for(stale_partition, 120, "the edited test's results to show stale", live["proc"], live["log"])
            assert page["outcome"]["status"] == "failed"
            untouched = partition_page(port, results, "demo@v1|payment-rca-finds-the-database")
            assert untouched["stale"] == "FRESH"  # only the edited test
            # a person refreshing demo@v1's summaries now (the refresh job, as the UI launches it)
            # while the rerun waits: the rollup's up_to_date check names the edited test out of date
            params = {
                "selector": {**SELECTOR, "jobName": "refresh"},
                "runConfigData": {},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "demo@v1"}]},
            }
            answer = graphql(port, LAUNCH_RUN, {"params": params})["launchRun"]
            assert answer["__typename"] == "LaunchRunSuccess", answer
            by_hand = answer["run"]["runId"]
            wait_for(lambda: instance.get_run_by_id(by_hand).is_finished, 240, "the refresh", live["proc"], live["log"])
        finally:
            concurrency(live, 10)

        def seen_out_of_date():
            found = [
                e
                for e in check_executions(port, ["rca", "payments", "rollup"], "up_to_date")
                if e["timestamp"] >= edited
            ]
            # an execution whose run is still going has no evaluation yet
            return [e for e in found if e["evaluation"] and not e["evaluation"]["success"]] or None

        [stale, *_] = wait_for(seen_out_of_date, 120, "the rollup to say it is out of date", live["proc"], live["log"])
        assert stale["evaluation"]["severity"] == "WARN"
        assert "rca/payments::checkout-latency (test definition changed)" in stale["evaluation"]["description"]
        for key in (["benchmark", "comparison"], ["benchmark", "leaderboard"]):
            assert any(
                e["evaluation"] and not e["evaluation"]["success"] and e["timestamp"] >= edited
                for e in check_executions(port, key, "up_to_date")
            )

        def fresh_again():
            latest = check_executions(port, ["rca", "payments", "rollup"], "up_to_date")[0]
            done = latest["evaluation"]  # None while the refresh that evaluates it is still going
            return latest["timestamp"] > stale["timestamp"] and done is not None and done["success"]

        wait_for(fresh_again, 420, "the rerun and the refresh after it", live["proc"], live["log"])
        for key in (["benchmark", "comparison"], ["benchmark", "leaderboard"]):
            wait_for(
                lambda key=key: (check_executions(port, key, "up_to_date")[0]["evaluation"] or {}).get("success"),
                120,
                f"{key} up to date",
            )
        for agent in ("demo@v1", "demo@v2"):
            status = graphql(
                port, STALE, {"key": {"path": ["rca", "payments", "results"]}, "partition": f"{agent}|checkout-latency"}
            )
            assert status["assetNodeOrError"]["staleStatus"] == "FRESH"
        time.sleep(6)  # a few more sensor ticks: nothing else follows
        new = [r for r in instance.get_runs() if r.run_id not in before]
        evaluations = [r for r in new if r.job_name.startswith("evaluate__")]
        refreshes = [r for r in new if r.job_name == "refresh" and r.run_id != by_hand]
        assert evaluations and all(r.job_name == "evaluate__rca__payments" for r in evaluations)
        # one refresh run per version the edit reran, and only one
        from agent_health_dagster.defs.partitions import run_agent_versions

        registered = list(instance.get_dynamic_partitions("agent_versions"))
        rerun = {v for r in evaluations for v in run_agent_versions(r.tags, registered)}
        # one request (run key) per version; under load Dagster's daemon has launched one request's
        # run more than once (the same sensor, the same run key), which is not ours to count
        requested = {(r.tags.get("dagster/partition"), r.tags.get("dagster/run_key")) for r in refreshes}
        refreshed = sorted(version for version, _ in requested)
        assert refreshed == sorted(rerun), [
            (r.job_name, r.tags.get("dagster/partition"), r.tags.get("dagster/run_key")) for r in new
        ]


ADD_PARTITION = """
mutation($selector: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $selector, partitionsDefName: $name, partitionKey: $key) { __typename }
}"""
SELECTOR = {"repositoryLocationName": "agent_health", "repositoryName": "__repository__"}


def test_a_version_added_by_hand_is_gone_after_the_next_sensor_tick(live):
    from dagster import DagsterInstance

    answer = graphql(live["port"], ADD_PARTITION, {"selector": SELECTOR, "name": "agent_versions", "key": "demo@v9"})
    assert answer["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", answer
    with DagsterInstance.from_config(str(live["home"])) as instance:
        wait_for(
            lambda: "demo@v9" not in instance.get_dynamic_partitions("agent_versions"),
            60,
            "the agent_versions sensor to remove the hand-added version",
            live["proc"],
            live["log"],
        )
        assert {"demo@v1", "demo@v2", "slow@v1", "count@v1"} <= set(instance.get_dynamic_partitions("agent_versions"))


def code_server_pids(group: int) -> list[int]:
    """The code server processes `dagster dev` started (in its process group)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode().split("\0")
            pairs = set(itertools.pairwise(args))  # the webserver and daemon have --code-server-* options
            if os.getpgid(int(entry.name)) == group and ({("code-server", "start"), ("api", "grpc")} & pairs):
                pids.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return pids


def concurrency(live, limit: int) -> None:
    out = subprocess.run(
        [
            DAGSTER,
            "instance",
            "concurrency",
            "set",
            "agent_health_agents",
            str(limit),
        ],
        env=live["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.timeout(1200)
def test_a_new_version_ends_fully_materialized_even_when_the_code_server_stalls(live):
    """A version added to the configuration: the agent_versions sensor requests every suite; the
    runs are dequeued while the code server is stopped past its timeout, are put back in the queue
    and start once it answers; the refresh follows; every rollup of the new version exists, with no
    click. (The runs are held in the queue by the agent pool until the code server is stopped, so
    the stall hits their launch every time.)"""
    from dagster import AssetKey, DagsterInstance

    config = live["root"] / "agent_health_config.py"
    concurrency(live, 0)  # evaluation runs wait in the queue
    config.write_text(
        config.read_text().replace(
            "agents=[", "agents=[AgentSpec(key='bot', connector='demo', versions={'v1': {}}), ", 1
        )
    )
    suites = live["pipeline"].suites
    stopped: list[int] = []
    try:
        with DagsterInstance.from_config(str(live["home"])) as instance:

            def queued():
                found = [r for r in instance.get_runs() if "bot@v1" in r.tags.get("agent_health/reason", "")]
                statuses = {r.status.value for r in found}
                assert statuses <= {"NOT_STARTED", "QUEUED"}, statuses  # the pool holds them in the queue
                return found if len(found) == len(suites) and statuses == {"QUEUED"} else None

            runs = wait_for(queued, 120, "the sensor's runs for bot@v1", live["proc"], live["log"])
            stopped = code_server_pids(live["proc"].pid)
            assert stopped, "no code server process found"
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            concurrency(live, 10)  # the daemon now dequeues them, against a stopped code server

            # the daemon gets to the runs while the code server is stopped: it cannot start them
            mark = live["log"].stat().st_size

            def dequeue_failed():
                with live["log"].open() as f:
                    f.seek(mark)
                    return "Caught an error dequeuing run" in f.read()

            wait_for(dequeue_failed, 300, "the daemon to try the runs against the stopped code server")
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
            stopped = []

            def done():
                current = [instance.get_run_by_id(r.run_id) for r in runs]
                return all(r.is_finished for r in current) and current

            for run in wait_for(done, 420, "the new version's runs", live["proc"], live["log"]):
                assert run.is_success, [e.message for e in instance.all_logs(run.run_id)][-5:]
            # ... and the one the daemon tried was put back in the queue, not failed
            assert any(
                "failed to reach the user code server, re-submitting" in (e.message or "")
                for r in runs
                for e in instance.all_logs(r.run_id)
            )

            def rollups():
                return all(
                    any(
                        r.partition_key == "bot@v1"
                        for r in instance.fetch_materializations(s.key("rollup"), limit=50).records
                    )
                    for s in suites
                )

            wait_for(rollups, 300, "every rollup of bot@v1", live["proc"], live["log"])

            def on_the_leaderboard():
                board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"]))
                rows = board.asset_materialization.metadata["leaderboard"].records if board else []
                return "bot@v1" in {r.data["agent"].split()[0] for r in rows}

            wait_for(on_the_leaderboard, 120, "bot@v1 on the leaderboard", live["proc"], live["log"])
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        concurrency(live, 10)
