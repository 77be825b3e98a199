"""expect() matchers: outcomes and evidence."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent_health.capabilities.context import TestContext, TestInfo, reset_context, set_context
from agent_health.capabilities.expect import expect
from agent_health.errors import ExpectationFailed, UsageError
from agent_health.judges.service import JudgeService
from agent_health.model import RunResult, Step, TestCase

RUN = RunResult(
    run_id="r1",
    output='{"service": "payments", "confidence": 0.9}',
    duration_ms=1500,
    trajectory=(
        Step(kind="thinking", content="hmm"),
        Step(kind="tool_call", tool="search_logs", args={"service": "payments", "q": {"level": "error"}}, call_id="1"),
        Step(kind="tool_result", tool="search_logs", content="ERROR", call_id="1"),
        Step(kind="tool_call", tool="get_metrics", args={"metric": "cpu"}, call_id="2"),
        Step(kind="message", content="done"),
    ),
)


@pytest.fixture
def ctx():
    case = TestCase(id="s::t", name="t", suite="s", source_file="s.eval.py")
    c = TestContext(
        case=case, info=TestInfo("s::t", "t", "s", (), None, "demo@v2"), runtime=None, judges=JudgeService()
    )
    token = set_context(c)
    yield c
    reset_context(token)


def outcome(ctx, fn):
    try:
        fn()
    except ExpectationFailed:
        pass
    return ctx.signals[-1]


class Diagnosis(BaseModel):
    service: str
    confidence: float


@pytest.mark.parametrize(
    "call, passed",
    [
        (lambda: expect(RUN).to_have_called_tool("search_logs"), True),
        (lambda: expect(RUN).to_have_called_tool("search_logs", args={"q": {"level": "error"}}), True),
        (lambda: expect(RUN).to_have_called_tool("search_logs", args={"service": "checkout"}), False),
        (lambda: expect(RUN).to_have_called_tool("restart"), False),
        (lambda: expect(RUN).not_to_have_called_tool("restart"), True),
        (lambda: expect(RUN).not_to_have_called_tool("get_metrics"), False),
        (lambda: expect(RUN).to_have_called_tools_in_order(["search_logs", "get_metrics"]), True),
        (lambda: expect(RUN).to_have_called_tools_in_order(["get_metrics", "search_logs"]), False),
        (lambda: expect(RUN).to_complete_within(seconds=2), True),
        (lambda: expect(RUN).to_complete_within(seconds=1), False),
        (lambda: expect(RUN).to_have_steps_of_type("tool_call", count=2), True),
        (lambda: expect(RUN).to_have_steps_of_type("tool_result", count=2), False),
        (lambda: expect(RUN).to_have_steps_of_type("thinking"), True),
        (lambda: expect(RUN).to_match_schema(Diagnosis), True),
        (lambda: expect(RUN).to_match_schema({"type": "object", "required": ["service", "remediation"]}), False),
        (
            lambda: expect(RUN).to_match_schema({"type": "object", "properties": {"confidence": {"maximum": 0.5}}}),
            False,
        ),
        (lambda: expect("Payment-Service down").to_match(r"payment[- ]service"), True),
        (lambda: expect("checkout").to_match("payment"), False),
        (lambda: expect([1, 2]).to_contain(2), True),
        (lambda: expect("abc").to_contain("z"), False),
        (lambda: expect({"a": 1}).to_equal({"a": 1}), True),
        (lambda: expect(3).to_be_less_than(2), False),
        (lambda: expect(3).to_be_greater_than(2), True),
        (lambda: expect("3").to_be_greater_than(2), False),
        (lambda: expect("abc").not_.to_contain("z"), True),
    ],
)
def test_matchers(ctx, call, passed):
    signal = outcome(ctx, call)
    assert signal.passed is passed
    assert signal.kind == "deterministic" and signal.role == "gate"
    assert signal.evidence is not None and "expected" in signal.evidence and "actual" in signal.evidence
    if not passed:
        assert signal.reasoning


def test_failing_expect_raises_and_soft_does_not(ctx):
    with pytest.raises(ExpectationFailed, match="restart"):
        expect(RUN).to_have_called_tool("restart")
    expect.soft(RUN).to_have_called_tool("restart")
    assert [s.soft for s in ctx.signals] == [False, True]


def test_evidence_is_truncated(ctx):
    expect.soft("x" * 5000).to_contain("y")
    assert len(ctx.signals[0].evidence["actual"]) < 500


def test_expect_outside_a_test_is_a_clear_error():
    with pytest.raises(UsageError, match="outside a running test"):
        expect(1).to_equal(1)


def test_run_matchers_need_a_run_result(ctx):
    with pytest.raises(TypeError, match="needs the RunResult"):
        expect("text").to_have_called_tool("x")
