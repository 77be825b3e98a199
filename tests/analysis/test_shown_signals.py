"""A result's headline metrics are stored once, in `metrics`, and shown as `metric` signals by
the reports (`shown_signals`): the -v summary, JUnit's details of a failure; a result stored before they were
derived, or a test's own metric signal, is not shown twice."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from agent_health.analysis.metrics import shown_signals
from agent_health.model import Signal, TestResult
from tests.support.cli import cli_in_process

EVAL = """
from agent_health import expect, test


@test("payment", prompt="Diagnose why the payment service is failing.")
async def payment(agent):
    expect(await agent.run()).to_have_called_tool("search_logs")


@test("missing", prompt="Diagnose why the payment service is failing.")
async def missing(agent):
    expect(await agent.run()).to_have_called_tool("no_such_tool")
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("shown")
    (root / "evals").mkdir()
    (root / "evals" / "m.eval.py").write_text(EVAL)
    p = cli_in_process("run", "evals", "-v", "--no-judge", "--reporter", "junit=out/junit.xml", cwd=root)
    assert p.returncode == 1, p.stdout + p.stderr  # "missing" fails
    (log,) = (root / ".agent_health" / "results" / "_runs").glob("*/results.jsonl")
    stored = {doc["name"]: doc for doc in map(json.loads, log.read_text().splitlines())}
    return root, p.stdout, stored["payment"]


def test_a_stored_result_holds_each_number_once(ran):
    _, _, stored = ran
    assert [s["kind"] for s in stored["signals"]] == ["deterministic"]
    assert stored["metrics"]["tool_calls"] >= 1 and "latency_ms" in stored["metrics"]


def test_the_reports_show_the_numbers_as_metric_signals(ran):
    root, stdout, stored = ran
    shown = {s.name: s for s in shown_signals(TestResult.model_validate(stored))}
    assert {"metric:total_tokens", "metric:latency_ms", "metric:llm_calls", "metric:tool_calls"} <= set(shown)
    assert shown["metric:tool_calls"].value == stored["metrics"]["tool_calls"]
    assert all(s.role == "observe" and s.passed is None for n, s in shown.items() if n.startswith("metric:"))
    tools = stored["metrics"]["tool_calls"]
    assert re.search(rf"\[metric/observe\] metric:tool_calls = {tools}\b", stdout), stdout
    failure = ET.parse(root / "out" / "junit.xml").getroot().find(".//testcase[@name='missing']/failure")
    assert failure is not None and "[metric/observe] metric:latency_ms" in (failure.text or "")


def test_a_name_the_result_holds_is_not_shown_twice(ran):
    _, _, stored = ran
    result = TestResult.model_validate(stored)
    own = Signal(kind="metric", role="observe", name="metric:tool_calls", value=99.0)
    # a test's own metric signal, or one stored before the numbers were derived: kept, once
    shown = [s for s in shown_signals(result.model_copy(update={"signals": (*result.signals, own)}))]
    assert [s.value for s in shown if s.name == "metric:tool_calls"] == [99.0]
    assert [s.name for s in shown].count("metric:latency_ms") == 1
    assert shown_signals(result.model_copy(update={"metrics": {}})) == result.signals  # nothing to derive
