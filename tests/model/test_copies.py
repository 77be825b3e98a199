"""`built` makes the engine's models without validating values it made itself: what it makes must
be what the constructor makes from the same values (fields, defaults, given fields, JSON)."""

from __future__ import annotations

import pytest

from agent_health.model import Provenance, RunResult, Signal, Step, TestResult, Usage
from agent_health.model.copies import built


def _same(made: object, expected: object) -> None:
    assert type(made) is type(expected)
    assert made == expected
    assert made.model_fields_set == expected.model_fields_set  # type: ignore[attr-defined]
    assert made.model_dump_json() == expected.model_dump_json()  # type: ignore[attr-defined]
    assert list(made.__dict__) == list(expected.__dict__)  # field order, which JSON follows


def test_built_models_equal_the_validated_ones_field_for_field():
    run = RunResult(
        output="the answer",
        trajectory=(Step(kind="message", role="user", content="q"), Step(kind="tool_call", tool="t", args={"a": 1})),
        run_id="r1",
        usage=Usage.of(3, 4),
        raw_events=({"x": [1, 2]},),
    )
    signal = {"kind": "deterministic", "name": "to_have_called_tool('t')", "passed": True, "score": 1.0}
    result = {
        "test_id": "s::t",
        "name": "t",
        "suite": "s",
        "source_file": "s.json",
        "agent": "a@v1",
        "status": "passed",
        "score": 1.0,
        "signals": (Signal(**signal),),
        "run": run,
        "run_id": "r1",
        "metrics": {"tool_calls": 1},
        "provenance": built(Provenance, {"content_hash": "h", "judged_at": 1.5}),
    }
    _same(built(Signal, signal), Signal(**signal))
    _same(built(Provenance, {"content_hash": "h", "judged_at": 1.5}), Provenance(content_hash="h", judged_at=1.5))
    made = built(TestResult, result)
    _same(made, TestResult(**result))
    # a default factory makes each model its own value
    assert made.usage == Usage() and made.usage is not built(TestResult, result).usage
    assert TestResult.model_validate_json(made.model_dump_json()) == made


def test_built_refuses_unknown_and_missing_fields():
    with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
        built(Provenance, {"colour": "red"})
    with pytest.raises(TypeError, match=r"missing fields \['kind', 'name'\]"):
        built(Signal, {"passed": True})


def test_a_slot_pydantic_no_longer_keeps_is_set_by_name():
    """`_slot_setter` sets BaseModel's own attributes through their slots' descriptors; where a
    pydantic release keeps one elsewhere, it sets it by name, so a build never breaks on it."""
    import pydantic

    from agent_health.model import copies

    slot = pydantic.BaseModel.__dict__["__pydantic_extra__"]
    assert getattr(copies._slot_setter("__pydantic_extra__"), "__self__", None) is slot

    class Plain:  # an attribute kept in the instance's dict, as a release without the slot would
        pass

    plain = Plain()
    copies._slot_setter("__not_a_slot__")(plain, 5)  # type: ignore[arg-type]
    assert plain.__not_a_slot__ == 5  # type: ignore[attr-defined]
    # and the models built through the descriptors are the validated ones (above) with a copy too
    signal = built(Signal, {"kind": "metric", "role": "observe", "name": "metric:x", "value": 1.0})
    copy = copies.replaced(signal, {"value": 2.0})
    _same(copy, Signal(kind="metric", role="observe", name="metric:x", value=2.0))
