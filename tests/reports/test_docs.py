"""Every example in docs/reports.md (and docs/cli.md's reports section) runs as written: shell lines
through the real CLI, in order, with the exit code their comment states (`# exits N`, else 0),
and the notebook session as a doctest, in a project whose store holds a demo@v1 and a demo@v2 run."""

from __future__ import annotations

import doctest
import re
import shlex
import shutil
from pathlib import Path

import pytest

from agent_health import RunReport
from agent_health.stores import LocalResultStore
from tests.support.cli import cli_in_process

from ..conftest import ROOT
from .helpers import store_run

BLOCK = re.compile(r"```(bash|pycon)\n(.*?)```", re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def cli_reports_section() -> str:
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index("## Reports and comparisons")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


@pytest.fixture
def docs_project(report_project, tmp_path, monkeypatch) -> Path:
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    for n, report in enumerate((report_project.v1, report_project.v2)):
        results = RunReport.model_validate_json(report.read_bytes()).results
        store_run(store, f"20260104T00000{n}-0000ddd{n}", results, started_at=float(n))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_shell_line(line: str, cwd: Path) -> None:
    command, _, comment = line.partition("  #")
    expected = int(m.group(1)) if (m := re.search(r"exits (\d)", comment)) else 0
    words = shlex.split(command)
    out = None
    if ">" in words:
        i = words.index(">")
        words, out = words[:i], words[i + 1]
    assert words[0] == "agent-health", line
    p = cli_in_process(*words[1:], cwd=cwd)
    assert p.returncode == expected, f"{line!r} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    if out:
        (cwd / out).write_text(p.stdout)


def run_blocks(text: str, cwd: Path, name: str) -> int:
    ran = 0
    globs: dict = {}
    for kind, body in blocks(text):
        if kind == "bash":
            for line in body.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    run_shell_line(line, cwd)
                    ran += 1
        else:
            test = doctest.DocTestParser().get_doctest(body, globs, name, name, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(test)
            assert runner.failures == 0, f"{name}: {runner.failures} doctest example(s) failed (see output above)"
            ran += len(test.examples)
    return ran


def test_every_example_in_docs_reports_runs(docs_project):
    ran = run_blocks((ROOT / "docs" / "reports.md").read_text(), docs_project, "docs/reports.md")
    assert ran >= 20
    # what the examples wrote is what they say
    assert (docs_project / "report.html").read_text().count('<div class="test"') > 0
    assert "urn:agent-health:schema:result:v1" in (docs_project / "result.schema.json").read_text()
    assert '"regressed_tests"' in (docs_project / "comparison.json").read_text()
    assert (docs_project / "comparison.html").is_file() and (docs_project / "v1.html").is_file()
    assert (docs_project / "results.tap").read_text().startswith("TAP version 14\n")
    merged = RunReport.model_validate_json((docs_project / "merged.json").read_bytes())
    assert merged.summaries[0].total == sum(len(RunReport.model_validate_json(
        (docs_project / f"shard-{i}.json").read_bytes()).results) for i in (1, 2, 3))  # fmt: skip


def test_the_cli_reports_section_runs(docs_project):
    assert run_blocks(cli_reports_section(), docs_project, "docs/cli.md") >= 3
