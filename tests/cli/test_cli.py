"""The CLI: exit codes, reporters, filters, file errors. Run in the test process through the CLI's own
entry (tests/support/cli.py), but for the first test, which runs `python -m agent_health` as a user
does, in a process of its own."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from agent_health import RunReport
from tests.support.cli import cli_in_process

from ..conftest import ROOT, run_cli

GOOD = """
from agent_health import test, expect

@test("passes", prompt="Diagnose why the payment service is failing.", labels=["category:RCA", "fast"])
async def passes(agent, judge):
    r = await agent.run()
    expect(r).to_have_called_tool("search_logs")
    await judge(r, "payment service cannot reach its database")

@test("pure data", labels=["fast"])
def pure():
    expect({"a": 1}).to_equal({"a": 1})
"""

FAILING = """
from agent_health import test, expect

@test("wrong tool", prompt="Diagnose why the payment service is failing.")
async def wrong(agent):
    r = await agent.run()
    expect(r).to_have_called_tool("restart_service")

@test("infra", prompt="x")
def infra():
    raise ConnectionError("seed database unreachable")
"""


def test_all_passed_exits_0_and_prints_a_summary(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    p = run_cli("run", "evals", cwd=tmp_path)  # the console entry in a process of its own
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Running 2 test(s) against demo@v2" in p.stdout
    assert "demo@v2" in p.stdout and "100%" in p.stdout and "tokens" in p.stdout and "cost" in p.stdout


def test_failures_exit_1_and_reports_are_machine_readable(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    write_eval("bad.eval.py", FAILING)
    p = cli_in_process(
        "run",
        "evals",
        "--agent",
        "demo@v1",
        "--agent",
        "demo@v2",
        "--reporter",
        "summary",
        "--reporter",
        "json=out/report.json",
        "--reporter",
        "junit=out/junit.xml",
        cwd=tmp_path,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "bad::wrong-tool" in p.stdout and "seed database unreachable" in p.stdout

    report = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text())
    assert [s.agent for s in report.summaries] == ["demo@v1", "demo@v2"]
    v2 = report.summaries[1]
    assert (v2.total, v2.passed, v2.failed, v2.errored) == (4, 2, 1, 1)
    assert v2.pass_rate == round(2 / 3, 4)  # errored is excluded from the pass rate
    by_id = {(r.agent, r.test_id): r for r in report.results}
    assert by_id[("demo@v2", "bad::infra")].error.endswith("ConnectionError: seed database unreachable")

    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    assert root.tag == "testsuites" and root.get("tests") == "8"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {
        "bad.eval.py [demo@v1]",
        "bad.eval.py [demo@v2]",
        "good.eval.py [demo@v1]",
        "good.eval.py [demo@v2]",
    }
    bad = suites["bad.eval.py [demo@v2]"]
    cases = {c.get("name"): c for c in bad.findall("testcase")}
    assert cases["wrong tool"].find("failure") is not None
    assert "restart_service" in cases["wrong tool"].find("failure").get("message")
    assert cases["infra"].find("error") is not None
    # properties live at testsuite level (the JUnit XSD allows none in a testcase); per-test figures in system-out
    props = {p.get("name"): p.get("value") for p in suites["good.eval.py [demo@v2]"].find("properties")}
    assert float(props["mean_score"]) > 0.5 and int(props["total_tokens"]) > 0
    figures = dict(
        line.split(": ", 1) for line in suites["good.eval.py [demo@v2]"].find("testcase/system-out").text.splitlines()
    )
    assert float(figures["score"]) > 0.5 and int(figures["total_tokens"]) > 0


def test_json_reporter_on_stdout_keeps_stdout_clean(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    p = cli_in_process("run", "evals", "--reporter", "json", cwd=tmp_path)
    assert p.returncode == 0
    report = RunReport.model_validate(json.loads(p.stdout))
    assert len(report.results) == 2 and "Running 2 test(s)" in p.stderr


def test_broken_file_next_to_good_ones_exits_2_and_the_rest_runs(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    write_eval("broken.eval.py", "from agent_health import test\n\nimport not_a_module_anywhere\n")
    p = cli_in_process("run", "evals", "--reporter", "json=r.json", cwd=tmp_path)
    assert p.returncode == 2
    assert "broken.eval.py:3" in p.stdout and "not_a_module_anywhere" in p.stdout
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    assert len(report.results) == 2 and all(r.status == "passed" for r in report.results)
    assert report.load_errors and report.load_errors[0].startswith("broken.eval.py:3")


def test_usage_errors_exit_2(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    p = cli_in_process("run", "evals", "--agent", "nobody@v9", cwd=tmp_path)
    assert p.returncode == 2 and "unknown agent 'nobody@v9'; known: demo@v1, demo@v2" in p.stderr
    p = cli_in_process("run", "evals", "--agent", "demo@v7", cwd=tmp_path)
    assert p.returncode == 2 and "unknown version 'v7'" in p.stderr
    p = cli_in_process("run", "evals", "--grep", "nothing-matches-this", cwd=tmp_path)
    assert p.returncode == 2 and "no tests found matching the filters" in p.stderr
    p = cli_in_process("run", "nowhere", cwd=tmp_path)
    assert p.returncode == 2 and "nowhere: no such file or directory" in p.stderr
    p = cli_in_process("run", "evals", "--reporter", "yaml", cwd=tmp_path)
    assert p.returncode == 2 and "unknown reporter 'yaml'" in p.stderr
    p = cli_in_process("run", "evals", "--concurrency", "0", cwd=tmp_path)
    assert p.returncode == 2


def test_list_label_grep_and_default_eval_root(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    write_eval("bad.eval.py", FAILING)
    p = cli_in_process("run", "--list", cwd=tmp_path)  # default path: evals/ under the project root
    assert p.returncode == 0
    assert "good::passes" in p.stdout and "bad::infra" in p.stdout and "4 test(s) in 2 file(s)" in p.stdout
    p = cli_in_process("run", "--list", "--label", "fast", "--label", "category:RCA", cwd=tmp_path)
    assert p.stdout.splitlines()[0].startswith("good::passes") and "1 test(s)" in p.stdout
    p = cli_in_process("run", "evals", "--grep", "^good::", cwd=tmp_path)
    assert p.returncode == 0 and "Running 2 test(s)" in p.stdout


def test_no_judge_epochs_and_fail_fast(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    write_eval("bad.eval.py", FAILING)
    p = cli_in_process(
        "run", "evals/good.eval.py", "--no-judge", "--epochs", "3", "--reporter", "json=r.json", cwd=tmp_path
    )
    assert p.returncode == 0
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    r = next(r for r in report.results if r.test_id == "good::passes")
    assert r.epochs == 3 and r.pass_hat_k == 1.0 and any(s.skipped for s in r.signals)
    p = cli_in_process("run", "evals", "--fail-fast", "--concurrency", "1", "--reporter", "json=r.json", cwd=tmp_path)
    assert p.returncode == 1
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    assert len(report.results) == 1 and report.not_run == 3 and "not run" in p.stdout


def test_skip_judge_env_var(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    p = cli_in_process("run", "evals", "--reporter", "json", cwd=tmp_path, env={"AGENT_HEALTH_SKIP_JUDGE": "1"})
    report = RunReport.model_validate(json.loads(p.stdout))
    assert any(s.skipped for r in report.results for s in r.signals)


def test_demo_suite_runs_honestly():
    """The shipped demo evals: v2 mostly passes, v1 fails more, neither is perfect."""
    p = cli_in_process("run", "--agent", "demo@v1", "--agent", "demo@v2", "--reporter", "json", cwd=ROOT)
    assert p.returncode == 1
    report = RunReport.model_validate(json.loads(p.stdout))
    v1, v2 = report.summaries
    assert v2.pass_rate > 0.8 and v2.failed >= 1 and v1.pass_rate < v2.pass_rate
    assert v2.total_tokens > 2 * v1.total_tokens
    res = {(r.agent, r.test_id): r.status for r in report.results}
    assert res[("demo@v1", "rca::availability/missing-dns-record-for-the-inventory-database")] == "passed"
    assert res[("demo@v2", "rca::availability/missing-dns-record-for-the-inventory-database")] == "failed"


def test_cli_startup_does_not_import_heavy_modules(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from agent_health.cli.main import cli; "
        "print(sorted(m for m in ('dagster', 'boto3', 'opensearchpy', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert out == "[]"


def test_replay_flag_and_agents_command(write_eval, tmp_path):
    write_eval("good.eval.py", GOOD)
    p = cli_in_process("run", "evals", "--replay", "strict", cwd=tmp_path)
    assert p.returncode == 1 and "no recording" in p.stdout.lower()
    assert cli_in_process("run", "evals", "--replay", "record", cwd=tmp_path).returncode == 0
    p = cli_in_process("run", "evals", "--replay", "strict", "--reporter", "json", cwd=tmp_path)
    report = RunReport.model_validate(json.loads(p.stdout))
    assert p.returncode == 0 and [r.run.replayed for r in report.results if r.run] == [True]
    p = cli_in_process("agents", cwd=tmp_path)
    assert p.returncode == 0 and "demo@v1" in p.stdout and "demo@v2" in p.stdout
