"""The one run path: results stored as they finish (by the CLI too), one concurrency limit over
every agent version, every agent resolved before anything runs, fail-fast counted per agent, a
SIGKILL losing nothing stored, and report write errors that cost no results."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_health import RunReport, RunSettings, TestResult, define_config, load_tests, run_evaluation, run_tests
from agent_health.model import EvalRun
from agent_health.pipeline import Project, run_partitions
from agent_health.reporters.base import Reporter
from agent_health.reporters.json_report import read_jsonl
from agent_health.stores import LocalResultStore
from tests.support.cli import cli_in_process

from ..conftest import ROOT

TWO = """
from agent_health import test, expect

@test("passes", prompt="Diagnose why the payment service is failing.")
async def passes(agent):
    expect(await agent.run()).to_have_called_tool("search_logs")

@test("pure")
def pure():
    expect(1).to_equal(1)
"""


def _store(root: Path, sub: str = ".agent_health/results") -> LocalResultStore:
    return LocalResultStore(root / sub)


def test_the_cli_stores_every_result_and_the_run_by_default(write_eval, tmp_path):
    write_eval("two.eval.py", TWO)
    p = cli_in_process("run", "evals", "--agent", "demo@v1", "--agent", "demo@v2", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    store = _store(tmp_path)
    assert len(store.list()) == 4
    (run,) = store.list_runs()
    assert run.transport == "cli" and run.status == "finished" and run.agents == ("demo@v1", "demo@v2")
    assert [(s.agent, s.passed) for s in run.summaries] == [("demo@v1", 2), ("demo@v2", 2)]
    stored = list(store.run_results(run.id))
    assert len(stored) == 4 and {r.eval_run_id for r in stored} == {run.id}
    assert f"4 result(s) stored in {store.location} (run {run.id})" in p.stderr


def test_no_store_and_another_store(write_eval, tmp_path):
    write_eval("two.eval.py", TWO)
    assert cli_in_process("run", "evals", "--no-store", cwd=tmp_path).returncode == 0
    assert cli_in_process("run", "evals", cwd=tmp_path, env={"AGENT_HEALTH_STORE": "none"}).returncode == 0
    assert not (tmp_path / ".agent_health" / "results").exists()
    spec = json.dumps({"type": "local", "settings": {"path": "shared/results"}})
    assert cli_in_process("run", "evals", "--store", spec, cwd=tmp_path).returncode == 0
    assert len(_store(tmp_path, "shared/results").list()) == 2
    assert not (tmp_path / ".agent_health" / "results").exists()


class RecordsManifest(Reporter):
    keeps_results = False

    def __init__(self, store: LocalResultStore):
        self.store = store
        self.at_begin: EvalRun | None = None

    def begin(self, run: EvalRun) -> None:
        self.at_begin = self.store.get_run(run.id)


def test_the_manifest_is_written_at_the_start_and_rewritten_at_the_end(write_eval, tmp_path):
    write_eval("two.eval.py", TWO)
    store = _store(tmp_path)
    spy = RecordsManifest(store)
    settings = RunSettings(agents=("demo@v2",), store=None)
    outcome = asyncio.run(
        run_evaluation(
            load_tests([tmp_path / "evals"]).tests,
            define_config(root=str(tmp_path)),
            settings,
            reporters=[spy],
            store=store,
        )
    )
    assert spy.at_begin is not None and spy.at_begin.status == "running" and spy.at_begin.tests == 2
    final = store.get_run(outcome.run.id)
    assert final.status == "finished" and final.finished_at and final.summaries[0].passed == 2


PEAK_AGENT = """
import asyncio

state = {"now": 0, "peak": 0}

async def answer(prompt):
    state["now"] += 1
    state["peak"] = max(state["peak"], state["now"])
    await asyncio.sleep(0.05)
    state["now"] -= 1
    return f"peak so far {state['peak']}"
"""


def test_agent_versions_share_one_concurrency_limit(write_eval, tmp_path):
    (tmp_path / "peak_agent.py").write_text(PEAK_AGENT)
    config = define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "py",
                "connector": "python",
                "settings": {"function": "peak_agent:answer"},
                "versions": {"v1": {}, "v2": {}},
            }
        ],
    )
    src = ["from agent_health import test"]
    for i in range(12):
        src += [f"@test('t{i}', prompt='q{i}')", f"async def t{i}(agent):", "    await agent.run()"]
    write_eval("peak.eval.py", "\n".join(src) + "\n")
    settings = RunSettings(agents=("py@v1", "py@v2"), concurrency=3, store=None)
    outcome = asyncio.run(run_evaluation(load_tests([tmp_path / "evals"]).tests, config, settings))
    assert [(s.agent, s.passed) for s in outcome.run.summaries] == [("py@v1", 12), ("py@v2", 12)]
    import peak_agent  # the python connector imported it from the project root

    assert peak_agent.state["peak"] == 3  # one limit for both versions: never 6

    # the Dagster step's path (run_partitions) is the same run: one limit, stored, a manifest
    peak_agent.state["peak"] = 0
    project = Project(config=config, store=_store(tmp_path))
    ids = [t.id for t in load_tests([tmp_path / "evals"]).tests]
    out = run_partitions(project, "peak", {"py@v1": ids, "py@v2": ids}, RunSettings(concurrency=3))
    assert len(out) == 24 and all(r.status == "passed" for r in out)
    assert peak_agent.state["peak"] == 3
    (run,) = project.store.list_runs()
    assert run.transport == "dagster" and len(list(project.store.run_results(run.id))) == 24


MISSING_SECRET_CONFIG = """
from agent_health import define_config

config = define_config(agents=[{
    "key": "py",
    "connector": "python",
    "settings": {"function": "marker_agent:answer", "kwargs": {"token": {"env": "AH_TEST_MISSING_TOKEN"}}},
    "versions": {"v1": {"kwargs": {"token": "literal"}}, "v2": {}},
}])
"""

MARKER_AGENT = """
from pathlib import Path

def answer(prompt, token):
    Path(__file__).with_name("agent-ran").write_text(prompt)
    return "ok"
"""


def test_every_agent_version_is_resolved_before_any_test_runs(write_eval, tmp_path):
    write_eval(
        "one.eval.py",
        "from agent_health import test\n@test('t', prompt='hi')\nasync def t(agent):\n    await agent.run()\n",
    )
    (tmp_path / "agent_health_config.py").write_text(MISSING_SECRET_CONFIG)
    (tmp_path / "marker_agent.py").write_text(MARKER_AGENT)
    assert cli_in_process("run", "evals", "--agent", "py@v1", "--no-store", cwd=tmp_path).returncode == 0
    (tmp_path / "agent-ran").unlink()
    p = cli_in_process("run", "evals", "--agent", "py@v1", "--agent", "py@v2", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: setting agents.py.settings.kwargs.token: environment variable AH_TEST_MISSING_TOKEN is not set"
    ]
    assert not (tmp_path / "agent-ran").exists()  # py@v1 did not run either
    assert not (tmp_path / ".agent_health" / "results").exists()


FAILS_FIRST = """
from agent_health import test, expect

@test("a fails")
def a():
    expect(1).to_equal(2)

for i in range(4):
    @test(f"b {i}")
    def b():
        pass
"""


def test_fail_fast_across_agents_reports_what_never_ran_per_agent(write_eval, tmp_path):
    write_eval("ff.eval.py", FAILS_FIRST)
    args = "--agent demo@v1 --agent demo@v2 --fail-fast --concurrency 1 --reporter json=r.json".split()
    p = cli_in_process("run", "evals", *args, cwd=tmp_path)
    assert p.returncode == 1
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    assert report.not_run == 9 and len(report.results) == 1
    assert [(s.agent, s.total, s.not_run) for s in report.summaries] == [("demo@v1", 1, 4), ("demo@v2", 0, 5)]
    assert "9 test(s) not run (demo@v1: 4, demo@v2: 5), fail-fast" in p.stdout
    assert len(report.not_run_tests) == 9 and {t.reason for t in report.not_run_tests} == {"fail-fast"}
    assert [t.agent for t in report.not_run_tests] == ["demo@v1"] * 4 + ["demo@v2"] * 5  # in plan order
    (run,) = _store(tmp_path).list_runs()
    assert run.not_run == {"demo@v1": 4, "demo@v2": 5} and run.status == "finished"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


SLOW_SUITE = """
import asyncio
from agent_health import test

for i in range(60):
    @test(f"slow {i:02d}")
    async def slow():
        await asyncio.sleep(0.05)
"""


def test_kill_9_mid_run_keeps_every_stored_result_and_a_valid_jsonl_report(write_eval, tmp_path):
    write_eval("slow.eval.py", SLOW_SUITE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_health", "run", "evals", "--concurrency", "2", "--reporter", "jsonl=r.jsonl"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    report = tmp_path / "r.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not report.exists() or report.read_text().count("\n") < 10):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    lines = report.read_bytes().splitlines()
    reported = [TestResult.model_validate_json(line) for line in lines]  # every line is whole and valid
    assert 10 <= len(reported) < 60
    store = _store(tmp_path)
    (run,) = store.list_runs()
    assert run.status == "running"  # it never got to write its end
    stored = {r.test_id: r for r in store.run_results(run.id)}
    assert {r.test_id for r in reported} <= set(stored)  # a reported result is always stored first
    assert all(store.get(k) is not None for k in store.list())
    again = read_jsonl(report)
    assert [r.test_id for r in again.results] == [r.test_id for r in reported]
    assert again.summaries[0].total == len(reported) and again.eval_run_id == run.id


def test_jsonl_report_ends_with_the_summary_line(write_eval, tmp_path):
    write_eval("two.eval.py", TWO)
    p = cli_in_process("run", "evals", "--reporter", "jsonl=out/r.jsonl", "--reporter", "json=out/r.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in (tmp_path / "out" / "r.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all("test_id" in line for line in lines[:2])
    tail = RunReport.model_validate(lines[2])
    assert tail.results == [] and tail.summaries[0].passed == 2 and tail.eval_run_id
    full = RunReport.model_validate_json((tmp_path / "out" / "r.json").read_text())
    assert full.eval_run_id == tail.eval_run_id and len(full.results) == 2
    assert read_jsonl(tmp_path / "out" / "r.jsonl").summaries == full.summaries


def test_a_report_that_cannot_be_written_exits_2_and_loses_no_result(write_eval, tmp_path):
    write_eval("two.eval.py", TWO)
    (tmp_path / "adir").mkdir()
    p = cli_in_process("run", "evals", "--reporter", "json=adir", cwd=tmp_path)
    assert p.returncode == 2
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --reporter json=adir: cannot write adir: it is a directory; its report is incomplete "
        "(results are still stored)"
    ]
    assert "Traceback" not in p.stderr + p.stdout
    assert len(_store(tmp_path).list()) == 2

    p = cli_in_process("run", "evals", "--reporter", "jsonl=/dev/full", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "error: --reporter jsonl=/dev/full: cannot write /dev/full: No space left on device" in p.stderr
    assert len(_store(tmp_path).list_runs()) == 2 and all(r.status == "finished" for r in _store(tmp_path).list_runs())


class CountsLiveResults(Reporter):
    keeps_results = False
    alive_at_finish = -1

    def finish(self, report: RunReport) -> None:
        gc.collect()
        self.alive_at_finish = sum(isinstance(o, TestResult) for o in gc.get_objects())


def test_streaming_reporters_keep_no_results_in_memory(write_eval, tmp_path):
    src = ["from agent_health import test, expect"]
    for i in range(300):
        src += [f"@test('t{i}')", f"def t{i}():", "    expect(1).to_equal(1)"]
    write_eval("many.eval.py", "\n".join(src) + "\n")
    counter = CountsLiveResults()
    from agent_health.reporters.json_report import JsonLinesReporter, JsonReporter
    from agent_health.reporters.junit import JunitReporter
    from agent_health.reporters.summary import SummaryReporter

    settings = RunSettings(agents=("demo@v2",), concurrency=16)
    with open(os.devnull, "w") as devnull:
        reporters = [
            SummaryReporter(devnull),
            JsonLinesReporter(str(tmp_path / "r.jsonl")),
            JsonReporter(str(tmp_path / "r.json")),
            JunitReporter(str(tmp_path / "r.xml")),
            counter,
        ]
        outcome = asyncio.run(
            run_evaluation(
                load_tests([tmp_path / "evals"]).tests, define_config(root=str(tmp_path)), settings, reporters=reporters
            )
        )
    assert outcome.run.summaries[0].passed == 300 and outcome.stored == 300
    assert counter.alive_at_finish < 5, f"{counter.alive_at_finish} TestResult objects alive at the end"
    assert (tmp_path / "r.xml").read_text().count("<testcase ") == 300  # the streamed JUnit has every test


def test_interrupting_a_run_keeps_its_results_finishes_its_reports_and_says_so(write_eval, tmp_path):
    write_eval("slow.eval.py", SLOW_SUITE)
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        report = tmp_path / f"r{code}.jsonl"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent_health",
                "run",
                "evals",
                "--concurrency",
                "2",
                "--reporter",
                f"jsonl={report}",
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # a process started with SIGINT ignored (a background job of a non-interactive shell,
            # nohup) passes that on and Python keeps it: give the CLI the default disposition
            preexec_fn=_default_sigint,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not report.exists() or report.read_text().count("\n") < 6):
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert "Traceback" not in err
        summary = read_jsonl(report)  # finished: it has its summary line
        assert summary.not_run > 0 and summary.not_run + len(summary.results) == 60
        assert len(summary.not_run_tests) == summary.not_run and summary.not_run_reason == "interrupted"
        assert {t.reason for t in summary.not_run_tests} == {"interrupted"}
        run = _store(tmp_path).get_run(summary.eval_run_id)
        assert run.status == "interrupted" and run.not_run == {"demo@v2": summary.not_run}
        assert len(list(_store(tmp_path).run_results(run.id))) == len(summary.results)


def test_before_all_and_after_all_run_once_per_run_around_every_agent_version(write_eval, tmp_path):
    log = tmp_path / "hooks.log"
    write_eval(
        "hooks.eval.py",
        f"""
        import asyncio
        from agent_health import test, before_all, after_all

        LOG = {str(log)!r}

        def note(line):
            with open(LOG, "a") as fh:
                fh.write(line + "\\n")

        @before_all
        def up():
            note("before_all")

        @after_all
        def down():
            note("after_all")

        for i in range(6):
            @test(f"t{{i}}")
            async def t(test_info):
                await asyncio.sleep(0.01)
                note("test " + test_info.agent)
        """,
    )
    settings = RunSettings(agents=("demo@v1", "demo@v2"), concurrency=4, store=None)
    outcome = asyncio.run(
        run_evaluation(load_tests([tmp_path / "evals"]).tests, define_config(root=str(tmp_path)), settings)
    )
    assert [s.passed for s in outcome.run.summaries] == [6, 6]
    lines = log.read_text().splitlines()
    assert lines[0] == "before_all" and lines[-1] == "after_all"
    assert lines.count("before_all") == lines.count("after_all") == 1
    assert sorted(lines[1:-1]) == ["test demo@v1"] * 6 + ["test demo@v2"] * 6


def test_an_agent_named_by_its_key_alone_runs_as_its_default_version(tmp_path, monkeypatch):
    """`run_tests(..., "bench")` for an agent without versions: its results and the run's tallies
    both name it `bench@default` (the tallies were keyed `bench` and the run ended in a KeyError)."""
    (tmp_path / "bench_agent.py").write_text("def answer(prompt, **_):\n    return 'hello ' + prompt\n")
    (tmp_path / "t.eval.py").write_text(
        "from agent_health import test, expect\n\n"
        "@test('greets', prompt='you')\n"
        "async def greets(agent):\n"
        "    result = await agent.run()\n"
        "    expect(result.output).to_equal('hello you')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = define_config(
        agents={"bench": {"key": "bench", "connector": "python", "settings": {"function": "bench_agent:answer"}}},
        root=str(tmp_path),
    )
    (result,) = run_tests(load_tests([tmp_path / "t.eval.py"]).tests, config, "bench")
    assert (result.agent, result.status) == ("bench@default", "passed")
