"""`agent-health compare` as a user runs it: every kind of input, the table, --json, --html and the
CI exit codes."""

from __future__ import annotations

import json

from agent_health import RunReport
from agent_health.analysis.compare import compare_results
from agent_health.stores import LocalResultStore
from tests.reports.helpers import result, store_run
from tests.support.cli import cli_in_process


def _json(p) -> dict:
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return json.loads(p.stdout)


def test_json_reports_compare_like_the_library_function(report_project):
    v1 = RunReport.model_validate_json(report_project.v1.read_bytes())
    v2 = RunReport.model_validate_json(report_project.v2.read_bytes())
    expected = compare_results(v1.results, v2.results)
    got = _json(
        cli_in_process("compare", str(report_project.v1), str(report_project.v2), "--json", cwd=report_project.root)
    )
    assert got["flip_counts"] == expected.flip_counts and got["regressed_tests"] == expected.regressed_tests
    assert got["stats"] == expected.stats.model_dump(mode="json")  # same seed, same bootstrap interval
    assert got["baseline"].startswith("demo@v1") and got["candidate"].startswith("demo@v2")
    # the demo story: v2 fixes the root causes v1 misses and regresses the DNS scenario and the budget
    assert expected.flip_counts["fixed"] >= 4 and expected.regressed_tests


def test_run_ids_agent_versions_and_picked_agents_give_the_same_comparison(report_project):
    cwd = report_project.store.root.parents[1]
    runs = _json(
        cli_in_process("compare", report_project.run_ids["v1"], report_project.run_ids["v2"], "--json", cwd=cwd)
    )
    agents = _json(cli_in_process("compare", "demo@v1", "demo@v2", "--json", cwd=cwd))
    both = report_project.run_ids["both"]
    picked = _json(cli_in_process("compare", f"{both}#demo@v1", f"{both}#demo@v2", "--json", cwd=cwd))
    for other in (agents, picked):
        assert other["flip_counts"] == runs["flip_counts"] and other["stats"]["mcnemar"] == runs["stats"]["mcnemar"]
    assert runs["baseline"] == f"demo@v1 (run {report_project.run_ids['v1']})" and agents["baseline"] == "demo@v1"


def test_table_output_and_the_html_page(report_project, tmp_path):
    page = tmp_path / "cmp.html"
    p = cli_in_process(
        "compare", str(report_project.v1), str(report_project.v2), "--html", str(page), cwd=report_project.root
    )
    assert p.returncode == 0, p.stderr
    assert "McNemar exact p" in p.stdout and "Wilson" in p.stdout and "bootstrap" in p.stdout
    assert "regressed" in p.stdout and "fixed" in p.stdout and f"comparison page: {page}" in p.stdout
    html = page.read_text()
    assert 'id="flip-counts"' in html and html.count('<div class="test"') == 15


def test_fail_on_regression_and_significant(report_project, tmp_path):
    args = ("compare", str(report_project.v1), str(report_project.v2))
    assert cli_in_process(*args, cwd=report_project.root).returncode == 0  # informative by default
    assert cli_in_process(*args, "--fail-on", "regression", cwd=report_project.root).returncode == 1
    same = cli_in_process(
        "compare", str(report_project.v2), str(report_project.v2), "--fail-on", "regression", cwd=report_project.root
    )
    assert same.returncode == 0

    # significant: 6 of 10 tests pass -> fail, none the other way: McNemar p = 2/64 = 0.031 < 0.05
    store = LocalResultStore(tmp_path / "store")
    base = [result(f"t{i}", agent="a@v1") for i in range(10)]
    worse = [result(f"t{i}", "failed" if i < 6 else "passed", agent="a@v2") for i in range(10)]
    slightly = [result(f"t{i}", "failed" if i < 1 else "passed", agent="a@v3") for i in range(10)]
    for n, rs in enumerate((base, worse, slightly)):
        store_run(store, f"20260102T00000{n}-0000bbb{n}", rs, started_at=float(n))
    sig = ("--fail-on", "significant")
    assert cli_in_process("compare", f"{store.root}#a@v1", f"{store.root}#a@v2", *sig, cwd=tmp_path).returncode == 1
    # one regression of ten is no evidence (p = 1): significant passes, regression fails
    assert cli_in_process("compare", f"{store.root}#a@v1", f"{store.root}#a@v3", *sig, cwd=tmp_path).returncode == 0
    assert (
        cli_in_process(
            "compare", f"{store.root}#a@v1", f"{store.root}#a@v3", "--fail-on", "regression", cwd=tmp_path
        ).returncode
        == 1
    )
    # alpha decides: at 0.01 the six regressions are not significant
    loose = cli_in_process("compare", f"{store.root}#a@v1", f"{store.root}#a@v2", *sig, "--alpha", "0.01", cwd=tmp_path)
    assert loose.returncode == 0


def test_bad_input_exits_2_with_one_clear_message(report_project):
    cwd = report_project.store.root.parents[1]
    missing = cli_in_process("compare", "gone/v1.json", str(report_project.v2), cwd=cwd)
    assert missing.returncode == 2 and "BASELINE 'gone/v1.json': no such file" in missing.stderr
    unknown = cli_in_process("compare", "demo@v1", "20990101T000000-deadbeef", cwd=cwd)
    assert unknown.returncode == 2 and "CANDIDATE '20990101T000000-deadbeef'" in unknown.stderr
    assert "agent versions with results: demo@v1, demo@v2" in unknown.stderr
    several = cli_in_process("compare", str(report_project.both), str(report_project.v2), cwd=cwd)
    assert several.returncode == 2 and f"pick one with {report_project.both}#demo@v1" in several.stderr
    wrong = cli_in_process("compare", f"{report_project.both}#demo@v9", str(report_project.v2), cwd=cwd)
    assert wrong.returncode == 2 and "has no results of demo@v9; it holds: demo@v1, demo@v2" in wrong.stderr
    for p in (missing, unknown, several, wrong):
        assert "Traceback" not in p.stderr and p.stdout == ""


def test_a_partial_comparison_says_how_many_tests_one_side_has_no_result_for(tmp_path):
    """A killed baseline run: 6 of 10 candidate tests have no baseline result, and one baseline test
    has no candidate result. The summary, the JSON (validated against the published schema) and
    the page say so, so nobody reads the 4 compared tests as the whole comparison."""
    from click.testing import CliRunner
    from jsonschema import Draft202012Validator

    from agent_health.cli.compare import compare_command
    from agent_health.cli.schema import published_path
    from agent_health.config import define_config

    store = LocalResultStore(tmp_path / "store")
    for r in [result(f"t{i}", agent="a@v1") for i in (*range(4), 10)] + [
        result(f"t{i}", agent="a@v2") for i in range(10)
    ]:
        store.put(r)
    base, cand = f"{store.root}#a@v1", f"{store.root}#a@v2"

    def compare(*args: str):
        out = CliRunner().invoke(compare_command, list(args), obj={"config": define_config()})
        assert out.exit_code == 0, out.output
        return out.output

    text = compare(base, cand, "--html", str(tmp_path / "cmp.html"))
    assert (
        "partial: 4 of 11 test(s) compared; 6 candidate test(s) have no baseline result (added), "
        "1 baseline test(s) have no candidate result (removed)"
    ) in text
    got = json.loads(compare(base, cand, "--json"))
    assert (got["compared_tests"], got["baseline_missing_results"], got["candidate_missing_results"]) == (4, 6, 1)
    assert got["baseline_missing"] == [f"s::t{i}" for i in range(4, 10)] and got["candidate_missing"] == ["s::t10"]
    assert got["complete"] is False
    assert list(Draft202012Validator(json.loads(published_path("comparison").read_text())).iter_errors(got)) == []
    page = (tmp_path / "cmp.html").read_text()
    assert 'id="coverage" data-complete="false"><b>partial: 4 of 11 test(s) compared;' in page
    # a whole comparison says that too
    whole = compare(cand, cand)
    assert "complete: every one of the 10 test(s) has a result on both sides" in whole
    assert json.loads(compare(cand, cand, "--json"))["complete"] is True
