"""Realistic results for the store tests: usage, labels, insights, signals and an agent run."""

from __future__ import annotations

from typing import Any

from agent_health.model import Insight, RunResult, Signal, Step, TestResult, Usage


def make_result(test_id: str, agent: str = "demo@v1", suite: str = "rca", **kw: Any) -> TestResult:
    status = kw.pop("status", "passed")
    run = RunResult(
        output=f"answer for {test_id}: the payment service cannot reach db-primary",
        trajectory=(
            Step(kind="tool_call", tool="search_logs", args={"query": "payment"}, call_id="c1"),
            Step(kind="tool_result", tool="search_logs", content="Connection refused to db-primary:5432", call_id="c1"),
        ),
        run_id=f"run-{test_id}",
        duration_ms=120.0,
        usage=Usage(input_tokens=120, output_tokens=30, total_tokens=150, model="demo-sre"),
    )
    fields: dict[str, Any] = {
        "test_id": test_id,
        "name": test_id.rsplit("::", 1)[-1],
        "suite": suite,
        "source_file": f"{suite}.eval.py",
        "labels": ("category:RCA", "difficulty:Hard"),
        "content_hash": "c0ffee",
        "agent": agent,
        "status": status,
        "score": 1.0 if status == "passed" else 0.0,
        "signals": (Signal(kind="deterministic", name="called search_logs", passed=status == "passed", score=1.0),),
        "insights": (Insight(rule="redundant_calls", summary="searched twice", evidence={"calls": 2}),),
        "run": run,
        "run_id": run.run_id,
        "duration_ms": 130.0,
        "usage": run.usage,
        "cost_usd": 0.0012,
    }
    fields.update(kw)
    return TestResult(**fields)


def suite_results(n: int = 90, **kw: Any) -> list[TestResult]:
    """`n` results of one suite with every status, labels, epochs, errors and insights."""
    out = []
    for i in range(n):
        status = ("passed", "failed", "errored")[i % 3]
        extra = {"epochs": 3, "pass_at_k": 1.0, "pass_hat_k": 0.0, "flaky": True} if i % 10 == 0 else {}
        insights = (Insight(rule="ignored_tool_errors", severity="error", summary="s", recommendation="check"),)
        out.append(
            make_result(
                f"{kw.get('suite', 'rca')}::t{i:03d}",
                status=status,
                duration_ms=float(i),
                labels=(f"group:{i % 4}",),
                error="agent unreachable" if status == "errored" else None,
                insights=insights if i % 5 == 0 else (),
                **extra,
                **kw,
            )
        )
    return out
