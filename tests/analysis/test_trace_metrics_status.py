"""The trace metrics' status of a run without traces: said by the engine's run metrics, so the
trace-metrics analyzer has nothing to add and returns the result as it is (no copy per test);
a result without it (made elsewhere) still gets it from the analyzer."""

from __future__ import annotations

import asyncio

from agent_health.analysis.metrics import run_metrics, with_trace_metrics
from agent_health.model import RunResult, Step, TestResult


def _result(metrics: dict) -> TestResult:
    run = RunResult(output="done", run_id="r1", trajectory=(Step(kind="message", role="user", content="go"),))
    return TestResult(
        test_id="s::t", name="t", suite="s", source_file="s.json", agent="a@v1", status="passed", run=run,
        metrics=metrics,
    )  # fmt: skip


def test_an_untraced_runs_metrics_end_with_the_status_the_analyzer_would_add():
    run = _result({}).run
    plain, untraced = run_metrics(run), run_metrics(run, untraced=True)
    assert "traces" not in plain
    assert untraced == {**plain, "traces": {"status": "not_enabled"}} and list(untraced)[-1] == "traces"
    analyze = with_trace_metrics()
    from_analyzer = asyncio.run(analyze(_result(plain)))
    assert from_analyzer.metrics == untraced and list(from_analyzer.metrics) == list(untraced)
    said = _result(untraced)
    assert asyncio.run(analyze(said)) is said  # nothing to add: the same object
    assert run_metrics(run, untraced=True)["traces"] is not untraced["traces"]  # each result its own dict
