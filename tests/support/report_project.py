"""A real project for the report and reporter tests (tests/reports, tests/reporters): the shipped
demo evals plus a hostile eval, run once per session through the CLI against demo@v1, demo@v2 and a
hostile agent, and the runs written to a local result store (as the CLI stores them). Fixture
`report_project`, a plugin of tests/conftest.py."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_health import RunReport
from agent_health.stores import LocalResultStore
from tests.conftest import ROOT
from tests.reports.helpers import store_run
from tests.support.cli import cli_in_process

# What hostile agent output looks like: markup, a script that closes its element, an event handler.
HOSTILE = '</script><script>alert(1)</script><img src=x onerror="alert(2)"><b>bold?</b> & "quotes"'

HOSTILE_AGENT = f"""
from agent_health.model import RunResult, Step, Usage

HOSTILE = {HOSTILE!r}


def run(prompt, run_id):
    return RunResult(
        output="answer " + HOSTILE,
        run_id=run_id,
        trajectory=(
            Step(kind="thinking", content="thinking " + HOSTILE),
            Step(kind="tool_call", tool="search_logs", args={{"query": HOSTILE}}, call_id="c1"),
            Step(kind="tool_result", tool="search_logs", call_id="c1", content="logs " + HOSTILE),
            Step(kind="message", content="answer " + HOSTILE),
        ),
        usage=Usage.of(10, 5, model="gpt-4o-mini"),
    )
"""

HOSTILE_EVAL = f"""
from agent_health import expect, test

HOSTILE = {HOSTILE!r}


@test("hostile output stays text", labels=["category:security"], prompt="say something " + HOSTILE)
async def hostile(agent, judge):
    result = await agent.run()
    expect.soft(result.output).to_equal(HOSTILE)
    await judge(result, "the answer " + HOSTILE + " is harmless")
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "hostile", "connector": "python", "settings": {"function": "hostile_agent:run"},
             "versions": {"v1": {}}}],
)
"""


@dataclass
class Project:
    root: Path
    both: Path  # JSON report of demo@v1 and demo@v2 over every demo eval
    v1: Path
    v2: Path
    hostile: Path  # JSON report of the hostile agent
    store: LocalResultStore  # the runs below, in <root>/.agent_health/results
    run_ids: dict[str, str]


def _run(root: Path, out: Path, *args: str) -> RunReport:
    p = cli_in_process("run", *args, "--reporter", f"json={out}", cwd=root)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return RunReport.model_validate_json(out.read_bytes())


@pytest.fixture(scope="session")
def report_project(tmp_path_factory) -> Project:
    # Generate the reports in one folder and build the store in another: the runs the store holds
    # are exactly the ones written below, whatever the CLI itself stores.
    gen = tmp_path_factory.mktemp("gen")
    shutil.copytree(ROOT / "evals", gen / "evals")
    (gen / "evals" / "hostile.eval.py").write_text(HOSTILE_EVAL)
    (gen / "hostile_agent.py").write_text(HOSTILE_AGENT)
    (gen / "agent_health_config.py").write_text(CONFIG)
    demo = ["evals/rca.eval.py", "evals/runbooks.eval.py", "evals/agent_health_cases.json", "evals/smoke.yaml"]
    both = _run(gen, gen / "both.json", *demo, "--agent", "demo@v1", "--agent", "demo@v2")
    v1 = _run(gen, gen / "v1.json", *demo, "--agent", "demo@v1")
    v2 = _run(gen, gen / "v2.json", *demo, "--agent", "demo@v2")
    _run(gen, gen / "hostile.json", "evals/hostile.eval.py", "--agent", "hostile@v1")

    root = tmp_path_factory.mktemp("project")
    (root / "agent_health_config.py").write_text("from agent_health import define_config\nconfig = define_config()\n")
    store = LocalResultStore(root / ".agent_health" / "results")
    run_ids = {
        "v1": store_run(store, "20260101T000000-0000aaa1", v1.results, started_at=1000.0).id,
        "v2": store_run(store, "20260101T000100-0000aaa2", v2.results, started_at=2000.0).id,
        "both": store_run(store, "20260101T000200-0000aaa3", both.results, started_at=3000.0).id,
    }
    return Project(gen, gen / "both.json", gen / "v1.json", gen / "v2.json", gen / "hostile.json", store, run_ids)
