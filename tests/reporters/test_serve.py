"""`agent-health serve` as a user runs it: a real subprocess on a free port of 127.0.0.1 over a
store with runs. The run list and a run's report over HTTP, nothing else reachable (no path leads
to a file), a clean stop on SIGTERM and Ctrl-C, and in headless Chromium a running run's page
updating as results are stored, up to its final status."""

from __future__ import annotations

import http.client
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_health.model import EvalRun, RunSummary, Step, TestResult
from agent_health.stores import LocalResultStore
from tests.core.test_docs_examples import block
from tests.reports.helpers import result, store_run
from tests.support.net import wait_for_port
from tests.support.processes import stop
from tests.support.report_project import HOSTILE

from ..conftest import ROOT

CONFIG = "from agent_health import define_config\nconfig = define_config()\n"
OLD, NEW = "20260101T000000-0000aaa1", "20260102T000000-0000aaa2"


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    lines: queue.Queue[str]

    @property
    def port(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def raw(self, path: str, host: str | None = None) -> tuple[int, bytes]:
        """`path` sent exactly as written (urllib would normalize `..` away)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.putrequest("GET", path, skip_host=host is not None)
            if host is not None:
                conn.putheader("Host", host)
            conn.endheaders()
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=10)
        finally:
            stop(self.proc)
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        err = self.proc.stderr.read() if self.proc.stderr else ""
        return code, rest + err


def start_serve(*args: str, cwd: Path, port: tuple[str, ...] = ("--port", "0")) -> Server:
    """`agent-health serve ARGS --port 0` in `cwd`, up once it printed its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AGENT_HEALTH_CONFIG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_health", "serve", *args, *port],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        first = lines.get(timeout=30)
    except queue.Empty:
        stop(proc)
        pytest.fail("agent-health serve printed no URL within 30 s")
    if "http://" not in first:
        stop(proc)
        pytest.fail(f"agent-health serve did not start: {first}{proc.stderr.read() if proc.stderr else ''}")
    url = first.split(" at ", 1)[1].split()[0]
    assert url.startswith("http://127.0.0.1:"), first
    return Server(proc, url, lines)


def _results(n: int, agent: str = "demo@v1") -> list[TestResult]:
    statuses = ["passed", "failed", "errored"]
    return [
        result(
            f"t{i}",
            statuses[i % 3],
            agent,
            output=f"answer {i}",
            trajectory=(Step(kind="message", content=f"answer {i}"),),
        )
        for i in range(n)
    ]


@pytest.fixture
def runs_project(tmp_path) -> Path:
    """A project whose configured store holds two finished runs (the older of two agent versions)."""
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    store_run(store, OLD, _results(3) + _results(2, "demo@v2"), started_at=1000.0)
    store_run(store, NEW, [*_results(4), result("hostile", "failed", output=HOSTILE)], started_at=2000.0)
    return tmp_path


def test_the_run_list_and_a_run_report_are_served(runs_project):
    server = start_serve(cwd=runs_project)
    try:
        status, body = server.get("/api/runs")
        assert status == 200
        runs = json.loads(body)["runs"]
        assert [r["id"] for r in runs] == [NEW, OLD]  # newest first
        newest, oldest = runs
        assert (newest["status"], newest["results"], newest["passed"], newest["failed"], newest["errored"]) == (
            "finished",
            5,
            2,
            2,
            1,
        )
        assert oldest["agents"] == ["demo@v1", "demo@v2"] and oldest["results"] == 5

        status, index = server.get("/")
        assert status == 200 and NEW in index and "Content-Security-Policy" in index

        status, page = server.get(f"/runs/{NEW}/")
        assert status == 200 and 'src="report"' in page

        # the run's report is the page ReportBuilder renders (agent-health report's), of that run
        status, report = server.get(f"/runs/{NEW}/report")
        assert status == 200
        assert f"agent-health report: run {NEW}" in report
        assert all(f"s::t{i}" in report for i in range(4)) and "s::hostile" in report
        assert "<script>alert(1)</script>" not in report  # hostile output stays escaped
        status, old_report = server.get(f"/runs/{OLD}/report")
        assert status == 200 and "demo@v2" in old_report and "s::hostile" not in old_report
    finally:
        code, out = server.stop()
    assert code == 0 and "stopped" in out and "Traceback" not in out


def test_no_path_reaches_a_file_and_unknown_runs_are_404(runs_project):
    (runs_project / "secret.txt").write_text("TOP-SECRET-VALUE")
    server = start_serve(cwd=runs_project)
    try:
        for path in (
            "/../secret.txt",
            "/../../../../etc/passwd",
            "/runs/../../secret.txt",
            "/runs/..%2F..%2F..%2Fsecret.txt/report",
            "/runs/%2e%2e/report",
            "/runs/../report",
            f"/runs/{NEW}/../../../secret.txt",
            f"/_runs/{NEW}/run.json",
            f"/.agent_health/results/_runs/{NEW}/results.jsonl",
            "/agent_health_config.py",
            "/secret.txt",
            "/api/runs/nope",
            "/runs/20990101T000000-00000000/",
            "/runs/.hidden/report",
        ):
            status, body = server.raw(path)
            assert status == 404, (path, status, body[:200])
            assert b"TOP-SECRET" not in body and b"root:" not in body and b"define_config" not in body
        # a page elsewhere reaching 127.0.0.1 through a name it controls (DNS rebinding) is refused
        status, _ = server.raw("/api/runs", host="attacker.example:80")
        assert status == 403
        assert server.raw("/api/runs", host=f"localhost:{server.port}")[0] == 200
    finally:
        server.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_it_stops_cleanly(runs_project, sig):
    server = start_serve(cwd=runs_project)
    assert server.get("/api/runs")[0] == 200
    code, out = server.stop(sig)
    assert code == 0, out
    assert "stopped" in out and "Traceback" not in out
    assert not wait_for_port(server.port, timeout=0.3)


def test_a_run_folder_or_run_id_serves_that_run_only(runs_project):
    for source in (str(runs_project / ".agent_health" / "results" / "_runs" / OLD), OLD):
        server = start_serve(source, cwd=runs_project)
        try:
            runs = json.loads(server.get("/api/runs")[1])["runs"]
            assert [r["id"] for r in runs] == [OLD]
            assert server.get(f"/runs/{NEW}/report")[0] == 404
            assert server.get(f"/runs/{OLD}/report")[0] == 200
        finally:
            server.stop()


def test_a_store_folder_is_served_from_anywhere(runs_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "agent_health_config.py").write_text(CONFIG)
    server = start_serve(str(runs_project / ".agent_health" / "results"), cwd=elsewhere)
    try:
        assert [r["id"] for r in json.loads(server.get("/api/runs")[1])["runs"]] == [NEW, OLD]
    finally:
        server.stop()


def test_a_source_that_names_nothing_is_one_clear_error(runs_project):
    from tests.support.cli import cli_in_process

    p = cli_in_process("serve", "no-such-run", cwd=runs_project)
    assert p.returncode == 2
    assert "serve 'no-such-run' is not a store folder, a run folder or a run id" in p.stderr
    assert NEW in p.stderr and "Traceback" not in p.stderr


def test_damaged_runs_are_named_and_the_server_keeps_serving(runs_project):
    runs = runs_project / ".agent_health" / "results" / "_runs"
    log = runs / NEW / "results.jsonl"
    log.write_bytes(log.read_bytes() + b"not a result\n")  # a damaged line in the middle of the log
    log.write_bytes(log.read_bytes() + log.read_bytes().splitlines(keepends=True)[0])
    store = LocalResultStore(runs_project / ".agent_health" / "results")
    running = store.get_run(NEW).model_copy(update={"status": "running", "finished_at": None, "summaries": ()})
    store.put_run(running)  # counted from its log, as a run still going is
    server = start_serve(cwd=runs_project)
    try:
        newest = json.loads(server.get(f"/api/runs/{NEW}")[1])
        assert newest["results"] == 5 and "skipped line(s) 6" in newest["error"]
        status, report = server.get(f"/runs/{NEW}/report")
        assert status == 200 and "skipped line(s) 6" in report and "s::t3" in report

        manifest = runs / OLD / "run.json"
        good = manifest.read_bytes()
        manifest.write_bytes(b"{torn")
        status, body = server.get("/api/runs")  # the others are still listed (test_faults_run_listing.py)
        assert status == 200 and [r["id"] for r in json.loads(body)["runs"]] == [NEW]
        manifest.write_bytes(good)
        assert [r["id"] for r in json.loads(server.get("/api/runs")[1])["runs"]] == [NEW, OLD]
    finally:
        code, out = server.stop()
    assert code == 0 and "Traceback" not in out
    assert f"run manifest {manifest} cannot be read" in out


def test_a_port_in_use_is_one_clear_error(runs_project):
    from ..conftest import run_cli  # a separate process: were the port taken, its server would serve

    server = start_serve(cwd=runs_project)
    try:
        p = run_cli("serve", "--port", str(server.port), cwd=runs_project, timeout=30)
        assert p.returncode == 2, p.stdout + p.stderr
        assert f"serve: cannot listen on 127.0.0.1:{server.port}" in p.stderr and "Traceback" not in p.stderr
        assert server.get("/api/runs")[0] == 200  # the first server is untouched
    finally:
        server.stop()


def test_the_documented_serve_commands_run(runs_project):
    """docs/reports.md's and docs/cli.md's `agent-health serve` lines as written (in a project whose
    store holds the run the docs name): each serves what its comment says, then stops on SIGTERM."""
    store = LocalResultStore(runs_project / ".agent_health" / "results")
    documented = "20260104T000000-0000ddd0"
    store_run(store, documented, _results(2), started_at=4000.0)
    lines = [
        *block("reports.md", "agent-health serve --port 0").strip().splitlines(),
        *block("cli.md", "agent-health serve --port 0").strip().splitlines(),
    ]
    expected = [[documented, NEW, OLD], [documented, NEW, OLD], [documented], [documented, NEW, OLD]]
    assert len(lines) == len(expected), lines
    for line, ids in zip(lines, expected):
        words = shlex.split(line.partition("  #")[0])
        assert words[:2] == ["agent-health", "serve"] and words[-2:] == ["--port", "0"], line
        server = start_serve(*words[2:], cwd=runs_project, port=())
        try:
            assert [r["id"] for r in json.loads(server.get("/api/runs")[1])["runs"]] == ids, line
            assert server.get(f"/runs/{ids[0]}/report")[0] == 200
        finally:
            code, out = server.stop()
        assert code == 0 and "stopped" in out, (line, out)


# -- a running run in a real browser ------------------------------------------------------------
def test_a_running_run_updates_in_the_browser_until_it_finishes(runs_project, browser):
    """Results written into the store while the pages are open show up without a reload, on the
    run list and on the run's page (its status bar and the report under it), then the final status."""
    store = LocalResultStore(runs_project / ".agent_health" / "results")
    live = "20260103T000000-0000bbb1"
    results = [r.model_copy(update={"eval_run_id": live}) for r in _results(3)]
    run = EvalRun(id=live, transport="cli", started_at=3000.0, agents=("demo@v1",), tests=3)
    store.put_run(run)
    store.put(results[0])
    server = start_serve(cwd=runs_project)
    errors: list[str] = []
    from playwright.sync_api import expect

    page = browser.new_page()
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url)
        row = page.locator(f'#runs tr[data-id="{live}"]')
        assert page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)") == [live, NEW, OLD]
        assert row.get_attribute("data-status") == "running"
        assert row.locator("td.results").text_content() == "1 / 3"

        store.put(results[1])  # the list follows without a reload
        expect(row.locator("td.results")).to_have_text("2 / 3", timeout=10_000)

        row.click()  # the run's page: status bar over the run's report
        page.wait_for_url(f"**/runs/{live}/")
        page.evaluate("() => { window.sameDocument = true; }")  # gone if anything reloads the page itself
        assert page.text_content("#status") == "running"
        assert page.text_content("#count") == "2 / 3"
        report = page.frame_locator("#report")
        assert report.locator(".test").count() == 2

        store.put(results[2])
        expect(page.locator("#count")).to_have_text("3 / 3", timeout=10_000)
        report.locator(".test").nth(2).wait_for(timeout=10_000)  # the report under it was rendered again
        assert report.locator(".test").count() == 3
        assert page.text_content("#errored") == "1"

        summary = RunSummary.of("demo@v1", results)
        store.put_run(run.model_copy(update={"status": "finished", "finished_at": 3004.0, "summaries": (summary,)}))
        expect(page.locator("#status")).to_have_text("finished", timeout=10_000)
        assert page.evaluate("() => window.sameDocument") is True
        assert "finished" in (report.locator("header.page").text_content() or "")

        page.go_back()
        page.wait_for_selector(f'#runs tr[data-id="{live}"][data-status="finished"]', timeout=10_000)
        assert errors == []
    finally:
        page.close()
        server.stop()


GATED_AGENT = """
import pathlib
import time

from agent_health.model import RunResult

GATES = pathlib.Path(__file__).parent / "gates"


def run(prompt, run_id):
    # answers once the test opens this prompt's gate, so the test decides when each result lands
    gate = GATES / prompt.split()[-1]
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return RunResult(output="ok " + prompt, run_id=run_id)
"""

GATED_EVAL = """
from agent_health import expect, test


@test("first", prompt="go 1")
async def first(agent, judge):
    expect((await agent.run()).output).to_equal("ok go 1")


@test("second", prompt="go 2")
async def second(agent, judge):
    expect((await agent.run()).output).to_equal("ok go 2")


@test("third fails", prompt="go 3")
async def third(agent, judge):
    expect((await agent.run()).output).to_equal("something else")
"""

GATED_CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "gated", "connector": "python", "settings": {"function": "gated_agent:run"},
             "versions": {"v1": {}}}],
)
"""


def test_a_real_run_is_watched_live_from_start_to_end(tmp_path, browser):
    """`agent-health run` in progress in one process, `agent-health serve` in another, the page in
    Chromium: the run appears as running, each result shows up as the engine stores it, and the
    final status and counts when the run ends."""
    from playwright.sync_api import expect

    (tmp_path / "agent_health_config.py").write_text(GATED_CONFIG)
    (tmp_path / "gated_agent.py").write_text(GATED_AGENT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "gated.eval.py").write_text(GATED_EVAL)
    (tmp_path / "gates").mkdir()
    server = start_serve(cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AGENT_HEALTH_CONFIG", None)
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_health",
            "run",
            "evals",
            "--agent",
            "gated@v1",
            "--concurrency",
            "1",
            "--no-judge",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url)
        row = page.locator("#runs tbody tr").first
        expect(row).to_have_attribute("data-status", "running", timeout=30_000)  # the index polls slowly: no run ran
        expect(row.locator("td.results")).to_have_text("0 / 3", timeout=10_000)
        (tmp_path / "gates" / "1").touch()
        expect(row.locator("td.results")).to_have_text("1 / 3", timeout=10_000)

        row.locator("a").click()
        expect(page.locator("#count")).to_have_text("1 / 3", timeout=10_000)
        assert page.text_content("#agents") == "gated@v1"
        (tmp_path / "gates" / "2").touch()
        expect(page.locator("#count")).to_have_text("2 / 3", timeout=10_000)
        expect(page.frame_locator("#report").locator(".test")).to_have_count(2, timeout=10_000)
        (tmp_path / "gates" / "3").touch()
        expect(page.locator("#status")).to_have_text("finished", timeout=30_000)
        assert page.text_content("#count") == "3 / 3"
        assert (page.text_content("#passed"), page.text_content("#failed")) == ("2", "1")
        expect(page.frame_locator("#report").locator(".test")).to_have_count(3, timeout=10_000)
        assert run.wait(timeout=30) == 1  # one test fails
        assert errors == []
    finally:
        page.close()
        if run.poll() is None:
            stop(run)
        server.stop()
