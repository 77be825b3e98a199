"""The HTML report as a file: self-contained, escaped, linear in size, written by the reporter and
by `agent-health report` from every kind of source."""

from __future__ import annotations

import json
import re
from html import unescape

from agent_health import RunReport
from agent_health.reporters.html import ReportBuilder, script_json, write_run_report
from tests.reports.helpers import result
from tests.support.cli import cli_in_process
from tests.support.report_project import HOSTILE


def test_script_json_cannot_close_its_script_element():
    text = script_json({"out": HOSTILE, "x": "a\u2028b <!-- c"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"out": HOSTILE, "x": "a\u2028b <!-- c"}


def test_page_is_self_contained_and_hostile_output_appears_only_escaped(report_project, tmp_path):
    page = write_run_report(
        tmp_path / "hostile.html", RunReport.model_validate_json(report_project.hostile.read_bytes())
    )
    html = page.read_text()
    assert HOSTILE not in html and "<script>alert" not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in html  # the row's error snippet, escaped by the template
    # no network when opened: nothing is loaded from anywhere, and the policy forbids it
    assert re.search(r"""<(?:script|link|img|iframe)[^>]+(?:src|href)=["'](?!data:|#)""", html) is None
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    # one executable script (the page's), every other script element is inert JSON
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts.count("") == 1 and all(s == "" or 'type="application/json"' in s for s in scripts)


def test_page_has_summary_suite_and_label_tables(report_project, tmp_path):
    report = RunReport.model_validate_json(report_project.both.read_bytes())
    html = write_run_report(tmp_path / "both.html", report).read_text()
    for section in ('id="summary"', 'id="suites"', 'id="labels"', 'id="tests"'):
        assert section in html
    assert html.count('<div class="test"') == len(report.results) == 30
    # two agent versions: deep-link keys carry the agent, and each result's details travel as JSON
    assert 'id="demo@v2/rca::payment-outage-is-traced-to-the-database"' in html
    assert len(re.findall(r'<script type="application/json" id="d\d+">', html)) == 30
    assert "category:RCA" in html and "difficulty:Hard" in html


def test_file_size_grows_linearly_with_the_tests(tmp_path):
    def size(n: int) -> int:
        rs = [
            result(f"t{i:05d}", "passed" if i % 3 else "failed", score=i % 7 / 7, labels=("a", "b")) for i in range(n)
        ]
        return ReportBuilder().extend(rs).write(tmp_path / f"{n}.html").stat().st_size

    base, one, two = size(0), size(200), size(400)
    per_test = (one - base) / 200
    assert abs((two - base) / 400 - per_test) < 0.02 * per_test


def test_reporter_writes_the_page_of_a_cli_run(report_project, tmp_path):
    out = tmp_path / "run.html"
    p = cli_in_process("run", "evals/smoke.yaml", "--reporter", f"html={out}", cwd=report_project.root)
    assert p.returncode in (0, 1), p.stderr
    html = out.read_text()
    assert html.count('<div class="test"') == 2 and "oom triage" in html
    # without FILE the page goes to stdout and the summary to stderr
    p = cli_in_process("run", "evals/smoke.yaml", "--reporter", "html", cwd=report_project.root)
    assert p.stdout.startswith("<!doctype html>") and "oom triage" in p.stdout and "demo@v2" in p.stderr


def test_report_command_reads_every_kind_of_source(report_project, tmp_path):
    cases = {
        "report.html": [str(report_project.both)],
        "run.html": [report_project.run_ids["v1"]],
        "newest.html": [],  # the newest run: "both"
        "store.html": [str(report_project.store.root)],
        "agent.html": ["demo@v1"],
        "picked.html": [f"{report_project.run_ids['both']}#demo@v2"],
    }
    counts = {}
    for name, args in cases.items():
        p = cli_in_process("report", *args, "-o", str(tmp_path / name), cwd=report_project.store.root.parents[1])
        assert p.returncode == 0, p.stdout + p.stderr
        counts[name] = (tmp_path / name).read_text().count('<div class="test"')
    assert counts == {
        "report.html": 30,
        "run.html": 15,
        "newest.html": 30,
        "store.html": 30,
        "agent.html": 15,
        "picked.html": 15,
    }
    assert f"run {report_project.run_ids['both']}" in (tmp_path / "newest.html").read_text()


def test_report_command_bad_sources_exit_2_with_one_clear_message(report_project, tmp_path):
    cwd = report_project.store.root.parents[1]
    missing = cli_in_process("report", "nope/missing.json", "-o", str(tmp_path / "x.html"), cwd=cwd)
    assert missing.returncode == 2 and "'nope/missing.json': no such file" in missing.stderr
    unknown = cli_in_process("report", "20990101T000000-deadbeef", "-o", str(tmp_path / "x.html"), cwd=cwd)
    assert unknown.returncode == 2 and "is not a JSON report file, a store folder, a run id" in unknown.stderr
    assert report_project.run_ids["both"] in unknown.stderr  # names what does exist
    junk = tmp_path / "junk.json"
    junk.write_text('{"results": 3}')
    bad = cli_in_process("report", str(junk), "-o", str(tmp_path / "x.html"), cwd=cwd)
    assert bad.returncode == 2 and "is not an agent-health JSON report" in bad.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "agent_health_config.py").write_text("from agent_health import define_config\nconfig = define_config()\n")
    none = cli_in_process("report", "-o", str(tmp_path / "x.html"), cwd=empty)
    assert none.returncode == 2 and "no runs in store" in none.stderr
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    unwritable = cli_in_process("report", str(report_project.v1), "-o", str(blocked / "x.html"), cwd=cwd)
    assert unwritable.returncode == 2 and f"cannot write HTML report {blocked / 'x.html'}" in unwritable.stderr
    assert "Traceback" not in missing.stderr + unknown.stderr + bad.stderr + none.stderr + unwritable.stderr
    assert not (tmp_path / "x.html").exists()
