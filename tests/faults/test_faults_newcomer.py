"""What a newcomer following the README hit (issue 19): a run with load errors that ended on a
green table, `compare` output that broke test ids when piped and left its counts and its CI exit
unexplained, `-v` lines without the values a matcher compared, and `run --help` without the html
reporter. Every case runs the CLI as a process with its output piped, as in a CI log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_health.reporters.registry import REGISTRY as REPORTERS
from agent_health.stores import LocalResultStore
from tests.reports.helpers import epochs, result, store_run
from tests.support.cli import cli_in_process

GOOD = """
from agent_health import test, expect

@test("fine")
def fine():
    expect(1).to_equal(1)
"""


def _after_table(out: str) -> str:
    """What the summary prints below its results table (the table ends on its bottom border)."""
    return out.rsplit("└", 1)[1]


FAILING = """
from agent_health import test, expect

@test("fails")
def fails():
    expect(1).to_equal(2)
"""


@pytest.mark.parametrize("case", ["summary", "json-on-stdout", "a-test-fails-too"])
def test_a_run_with_load_errors_ends_naming_the_files_that_did_not_load(case, evals, tmp_path):
    evals("good.eval.py", GOOD)
    evals("broken.eval.py", "from agent_health import test\n\nthis is not python(\n")
    evals("cases.json", '{"tests": [')
    if case == "a-test-fails-too":
        evals("failing.eval.py", FAILING)
    args = ("--reporter", "json") if case == "json-on-stdout" else ()
    p = cli_in_process("run", "evals", "--no-store", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr  # never success (nor a mere failure) while files failed to load
    summary = p.stderr if case == "json-on-stdout" else p.stdout
    tail = _after_table(summary)
    assert "2 load error(s)" in tail and "did not load" in tail, summary
    assert "broken.eval.py:3" in tail and "cases.json:1" in tail, summary
    assert "(not counted: 2 load error(s), below)" in summary  # the table's own title says so
    if case == "json-on-stdout":
        report = json.loads(p.stdout)
        assert len(report["load_errors"]) == 2 and [r["status"] for r in report["results"]] == ["passed"]


LONG = "availability/missing-dns-record-for-the-inventory-database-behind-the-checkout-service"


@pytest.fixture
def two_versions(tmp_path: Path) -> Path:
    """A project whose store holds a run of demo@v1 and one of demo@v2: two regressions with long
    ids, two fixes, and a fix within its trials' noise (three epochs per side)."""
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    base = [
        result(LONG, "passed", score=1.0),
        result("disk-full-answer-stays-within-the-token-budget", "passed", score=1.0),
        result("expired-certificate-behind-login-failures", "failed", score=0.0),
        result("checkout-latency", "failed", score=0.0),
        epochs("memory-leak-rather-than-a-low-limit", 1, 2),
    ]
    cand = [
        result(LONG, "failed", "demo@v2", score=0.0),
        result("disk-full-answer-stays-within-the-token-budget", "failed", "demo@v2", score=0.5),
        result("expired-certificate-behind-login-failures", "passed", "demo@v2", score=1.0),
        result("checkout-latency", "passed", "demo@v2", score=1.0),
        epochs("memory-leak-rather-than-a-low-limit", 3, 0, "demo@v2"),
    ]
    store_run(store, "20260101T000000-00000001", base, started_at=1.0)
    store_run(store, "20260101T000000-00000002", cand, started_at=2.0)
    return tmp_path


def test_compare_piped_keeps_every_test_id_whole(two_versions):
    p = cli_in_process("compare", "demo@v1", "demo@v2", cwd=two_versions, env={"COLUMNS": ""})
    assert p.returncode == 0, p.stderr
    for tid in (f"s::{LONG}", "s::disk-full-answer-stays-within-the-token-budget", "s::checkout-latency"):
        assert any(tid in line for line in p.stdout.splitlines()), p.stdout


def test_compare_explains_why_mcnemar_counts_more_fixes_than_the_flip_counts(two_versions):
    p = cli_in_process("compare", "demo@v1", "demo@v2", cwd=two_versions)
    assert "2 regressed, 2 fixed, 1 noise" in p.stdout, p.stdout
    mcnemar = next(line for line in p.stdout.splitlines() if "McNemar" in line)
    assert "(2 regressed, 3 fixed; 1 noise flip counted as fixed by McNemar" in mcnemar, mcnemar
    assert "overall status" in mcnemar


def test_the_comparison_page_explains_the_mcnemar_counts_too(two_versions):
    p = cli_in_process("compare", "demo@v1", "demo@v2", "--html", "comparison.html", cwd=two_versions)
    assert p.returncode == 0, p.stderr
    page = (two_versions / "comparison.html").read_text()
    note = re.search(r'<span id="mcnemar-note">([^<]*)</span>', page)
    assert note and note.group(1).startswith("1 noise flip counted as fixed by McNemar"), page[:3000]


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_compare_fail_on_regression_names_the_regressed_tests(as_json, two_versions):
    p = cli_in_process(
        "compare", "demo@v1", "demo@v2", "--fail-on", "regression", *(["--json"] if as_json else []), cwd=two_versions
    )
    assert p.returncode == 1
    assert "--fail-on regression: 2 regressed test(s)" in p.stderr, p.stderr
    assert f"s::{LONG} (passed -> failed)" in p.stderr
    assert "s::disk-full-answer-stays-within-the-token-budget (passed -> failed)" in p.stderr
    assert "memory-leak" not in p.stderr  # neither the fixes nor the noise flip
    if as_json:
        assert json.loads(p.stdout)["regressed_tests"]  # stdout stays one JSON document


MATCHERS = """
from agent_health import test, expect

@test("matchers", prompt="Diagnose why the payment service is failing.")
async def matchers(agent, judge):
    r = await agent.run()
    expect.soft(15234).to_be_less_than(20000)
    expect.soft(17).to_be_greater_than(40)
    expect.soft("alpha-42").to_equal("beta-43")
    expect.soft("needle-in-the-hay-77").to_contain("needle")
    expect.soft("text-88").to_match(r"^[0-9]+$")
    expect.soft(0).to_be_truthy()
    expect.soft(r).to_have_called_tool("search_logs")
    expect.soft(r).not_to_have_called_tool("search_logs")
    expect.soft(r).to_have_called_tools_in_order(["search_logs"])
    expect.soft(r).to_complete_within(seconds=120)
    expect.soft(r).to_have_steps_of_type("tool_call")
    expect.soft({"a": 1}).to_match_schema({"type": "object", "required": ["b"]})
    expect.soft(1).not_.to_equal(1)
    verdict = await judge.observe(r, "identifies that the payment service cannot reach its database")
    expect.soft(verdict).to_pass()
"""

# matcher -> (what its -v line shows as actual, as expected)
SHOWN = {
    "to_be_less_than(20000)": ("actual 15234", "expected < 20000"),
    "to_be_greater_than(40)": ("actual 17", "expected > 40"),
    "to_equal('beta-43')": ('actual "alpha-42"', 'expected "beta-43"'),
    "to_contain('needle')": ('actual "needle-in-the-hay-77"', 'expected "needle"'),
    "to_match('^[0-9]+$')": ('actual "text-88"', 'expected "^[0-9]+$"'),
    "to_be_truthy()": ("actual 0", "expected true"),
    "to_have_called_tool('search_logs')": ('actual [{"tool": "search_logs"', 'expected {"tool": "search_logs"'),
    "not_to_have_called_tool('search_logs')": ('actual {"calls": ', 'expected {"tool": "search_logs", "calls": 0}'),
    "to_have_called_tools_in_order(['search_logs'])": ('actual ["search_logs"', 'expected ["search_logs"]'),
    "to_complete_within(120s)": ('actual {"s": ', 'expected {"max_s": 120}'),
    "to_have_steps_of_type('tool_call')": ('actual {"count": ', 'expected {"kind": "tool_call", "count": ">0"}'),
    "to_match_schema(schema)": ('actual {"a": 1}', 'expected "json schema"'),
    "not_.to_equal(1)": ("actual 1", "expected 1"),
    "to_pass('identifies that the payment service": ('actual {"passed": true', 'expected "pass"'),
}


@pytest.fixture(scope="module")
def verbose_lines(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("verbose")
    (root / "evals").mkdir()
    (root / "evals" / "m.eval.py").write_text(MATCHERS)
    p = cli_in_process("run", "evals", "--no-store", "-v", cwd=root)
    assert p.returncode == 1, p.stdout + p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("matcher", list(SHOWN))
def test_verbose_shows_actual_and_expected_for_every_matcher(matcher, verbose_lines):
    actual, expected = SHOWN[matcher]
    lines = [line for line in verbose_lines if re.search(r"\[deterministic/gate\] " + re.escape(matcher), line)]
    assert len(lines) == 1, verbose_lines
    assert f" — {actual}" in lines[0] and f", {expected}" in lines[0], lines[0]


def test_run_help_names_every_reporter(tmp_path):
    p = cli_in_process("run", "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for name in ("summary", *(f"{r}[=FILE]" for r in REPORTERS.builtins)):
        assert name in p.stdout, (name, p.stdout)
    assert "html[=FILE]" in p.stdout
