"""A run killed with SIGKILL (or out of memory, or with its machine) never writes its end: its
manifest said `running` forever, in `serve`, `report` and every listing. The manifest now records
the process running it (host, pid, and on Linux what tells it from a later process with the same
pid) and a heartbeat (rewritten every `HEARTBEAT_S`); a reader shows a `running` manifest whose
process is gone, or whose heartbeat stopped, as `abandoned`, with why."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from pathlib import Path

import pytest

import agent_health.session.sink as sink_module
from agent_health import define_config, load_tests, run_evaluation
from agent_health.model import EvalRun, RunSettings
from agent_health.model.runs import ABANDONED_AFTER_S, RunProcess, this_process
from agent_health.stores import LocalResultStore
from tests.faults.conftest import cli
from tests.faults.lifecycle import budget, manifests, start, wait_until
from tests.reporters.test_serve import start_serve

CONFIG = "from agent_health import define_config\nconfig = define_config()\n"
EVAL = """
import time
from pathlib import Path

from agent_health import test


@test("quick")
def quick():
    pass


@test("slow")
def slow():
    Path("started").write_text("slow")
    time.sleep(120)
"""


def run_logs(root: Path) -> list[Path]:
    return list((root / ".agent_health" / "results" / "_runs").glob("*/results.jsonl"))


def test_a_run_killed_with_sigkill_shows_abandoned_in_report_serve_and_listings(tmp_path, evals):
    evals("mixed.eval.py", EVAL)
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    proc = start("run", "evals", "--no-judge", "--concurrency", "1", cwd=tmp_path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), budget(30))  # "quick" ran first
        wait_until(lambda: any(p.read_text() for p in run_logs(tmp_path)), budget(10))  # and is stored
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.communicate()
    [manifest] = manifests(tmp_path)
    assert manifest["status"] == "running"  # what the killed run left: it never wrote its end
    assert manifest["process"]["pid"] == proc.pid and manifest["process"]["host"] == socket.gethostname()
    assert manifest["heartbeat_at"] >= manifest["started_at"]
    run_id = manifest["id"]
    why = f"its process {proc.pid} on {socket.gethostname()} ended without finishing the run"

    report = cli("report", "-o", "page.html", cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    assert f"note: run {run_id} was abandoned: {why}" in report.stderr, report.stderr
    assert f"(cli, abandoned: {why})" in (tmp_path / "page.html").read_text()

    listing = cli("report", "no-such-run", cwd=tmp_path)
    assert listing.returncode == 2 and f"newest runs: {run_id} (abandoned)" in listing.stderr, listing.stderr

    server = start_serve(cwd=tmp_path)
    try:
        status, body = server.get("/api/runs")
        assert status == 200, body
        [shown] = json.loads(body)["runs"]
        assert shown["status"] == "abandoned" and shown["abandoned"] == why and shown["results"] == 1
        status, body = server.get(f"/api/runs/{run_id}")
        assert status == 200 and json.loads(body)["status"] == "abandoned", body
    finally:
        server.stop()


class Recording(LocalResultStore):
    """A local store that keeps every manifest it was given, in order."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.manifests: list[EvalRun] = []

    def put_run(self, run: EvalRun) -> None:
        self.manifests.append(run)
        super().put_run(run)


SLOW = """
import time

from agent_health import test


@test("takes a while")
def slow():
    time.sleep(1.0)
"""


def test_a_running_run_beats_and_its_last_manifest_is_its_end(tmp_path, evals, monkeypatch):
    monkeypatch.setattr(sink_module, "HEARTBEAT_S", 0.1)
    evals("slow.eval.py", SLOW)
    store = Recording(tmp_path / "results")
    settings = RunSettings(judge={"skip": True})
    outcome = asyncio.run(
        run_evaluation(load_tests([tmp_path / "evals"]).tests, define_config(root=str(tmp_path)), settings, store=store)
    )
    assert outcome.run.status == "finished"
    beats = [m.heartbeat_at for m in store.manifests if m.status == "running"]
    assert len(beats) >= 3 and beats == sorted(beats) and beats[-1] > beats[0], beats
    assert store.manifests[-1].status == "finished"  # no heartbeat after the end
    time.sleep(0.3)
    assert store.get_run(outcome.run.id).status == "finished"


@pytest.mark.parametrize(
    ("process", "silent_s", "shown"),
    [
        (RunProcess(host="ci-worker-7", pid=4242), ABANDONED_AFTER_S + 60, "abandoned"),
        (RunProcess(host="ci-worker-7", pid=4242), 5, "running"),
        (None, ABANDONED_AFTER_S + 60, "abandoned"),  # no process recorded: the heartbeat alone
        ("this process", ABANDONED_AFTER_S + 60, "running"),  # alive here: a late heartbeat is a slow store
    ],
)
def test_a_run_elsewhere_is_abandoned_once_its_heartbeat_stopped(process, silent_s, shown):
    now = time.time()
    owner = this_process() if process == "this process" else process
    run = EvalRun(process=owner, heartbeat_at=now - silent_s)
    seen = run.as_seen(now)
    assert seen.status == shown
    if shown == "abandoned":
        assert seen.abandoned is not None and f"no heartbeat for {silent_s:.0f} s" in seen.abandoned
    assert EvalRun().as_seen(now).status == "running"  # a manifest from before heartbeats: unknown, left as is
