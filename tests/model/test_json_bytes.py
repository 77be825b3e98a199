"""`model_json` writes a model's JSON through orjson where that gives pydantic's bytes and
through pydantic everywhere else: what it writes must be `model_dump_json()` byte for byte (the
store writes it, the secrets check searches it, reporters print it), whatever the values, and
the engine's own results must take the fast way (else the run pays pydantic's writer again)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import random
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer

from agent_health.model import Provenance, RunResult, Signal, Step, TestResult, Usage, json_bytes
from agent_health.model.copies import built, replaced
from agent_health.model.json_bytes import model_json
from agent_health.model.result import Insight, Judgement, TrialResult


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int


TEXTS = [
    "",
    "plain",
    'quote " and \\ back',
    "tab\tnew\nline\r",
    "\u00dcn\u00efcode \u2713 \u2028",
    "\x00\x1f\x7f",
    "</s>",
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A value an agent's raw event or a signal's evidence may hold: JSON's kinds mostly, and
    now and then one orjson does not write as pydantic does."""
    kind = rng.randrange(14 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 7, 2**63 - 1, -(2**63), 2**64, 2**70, Level.HIGH])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1.5, 0.1 + 0.2, 1e16, 1e300, 5e-324, -2.5e-8, float("inf"), float("nan")])
    if kind in (4, 5, 6):
        return rng.choice(TEXTS)
    if kind == 7:
        return rng.choice([Colour.RED, datetime.date(2026, 12, 7), datetime.datetime(2026, 12, 7, 1, 2, 3), b"bytes"])
    if kind == 8:
        return rng.choice([Point(1), {1, 2}, frozenset(), Usage.of(1, 2)])
    if kind in (9, 10):
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return tuple(items) if kind == 9 else items
    keys = ["k", "é", "", "10"] + ([1, None] if rng.random() < 0.1 else [])
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _result_values() -> dict[str, Any]:
    """A fixed-answer test's result as the engine builds it, with a trial and a judgement."""
    run = built(
        RunResult,
        {
            "output": "The payment service cannot reach db-primary.",
            "trajectory": (
                Step(kind="message", role="user", content="why?"),
                Step(kind="tool_call", role="assistant", tool="lookup", args={"q": "why?"}, call_id="c0"),
            ),
            "run_id": "r1",
            "agent": "fixed@v1",
            "started_at": 1796683102.0866957,
            "duration_ms": 0.0139,
            "usage": Usage.of(3, 4, model="m", cost_usd=0.25),
            "raw_events": ({"output": "x", "tool_calls": [{"name": "lookup", "args": {"q": "why?"}}]},),
        },
    )
    signal = Signal(kind="deterministic", name="to_have_called_tool('lookup')", passed=True, score=1.0)
    return {
        "test_id": "s::t",
        "name": "t",
        "suite": "s",
        "source_file": "s.json",
        "content_hash": "h",
        "agent": "fixed@v1",
        "status": "passed",
        "score": 1.0,
        "signals": (signal,),
        "metrics": {"tool_calls": 1, "step_latency_ms": [None, 1.5], "traces": {"status": "not_enabled"}},
        "run": run,
        "run_id": "r1",
        "started_at": 1796683102.08,
        "duration_ms": 0.63,
        "trials": (TrialResult(epoch=1, status="passed", score=1.0, signals=(signal,), run=run, duration_ms=0.5),),
        "trial_counts": {"passed": 1},
        "judgements": (Judgement(judged_at=1.5, content_hash="h", status="passed", score=1.0),),
        "provenance": built(Provenance, {"content_hash": "h", "judged_at": 1.5}),
    }


def _same_bytes(model: BaseModel) -> bytes:
    expected = model.__pydantic_serializer__.to_json(model)
    assert model_json(model) == expected
    return expected


def test_an_engine_result_is_written_byte_for_byte_and_by_orjson():
    result = built(TestResult, _result_values())
    text = _same_bytes(result)
    assert b'"run":{' in text
    # every model class in a result is written by orjson: a field of a type it cannot write the
    # same (a datetime, a set, a serializer) would send every result to pydantic's slower writer
    for cls in (TestResult, RunResult, Step, Usage, Signal, TrialResult, Judgement, Insight):
        writer = json_bytes._WRITERS.get(cls) or json_bytes._compiled(cls)
        assert writer is not json_bytes._refuse, f"{cls.__name__} is written by pydantic: see json_bytes' docstring"


@pytest.mark.parametrize("seed", range(200))
def test_any_values_in_a_result_give_pydantics_bytes(seed):
    rng = random.Random(seed)
    steps = tuple(
        Step(kind="tool_call", tool=rng.choice(TEXTS), args={"q": _value(rng)}, started_ms=rng.choice([None, 1.5]))
        for _ in range(rng.randrange(3))
    )
    run = RunResult(
        output=rng.choice(TEXTS),
        trajectory=steps,
        run_id="r1",
        raw_events=tuple(_value(rng) for _ in range(rng.randrange(4))),
        context=({"k": _value(rng)},),
    )
    signal = Signal(kind="deterministic", name="n", passed=True, score=1.0, evidence={"e": _value(rng)})
    values = _result_values() | {
        "run": run,
        "signals": (signal,),
        "metrics": {"m": _value(rng), "n": rng.choice([1, 1.0, None])},
        "insights": (Insight(rule="r", severity="info", summary="s", evidence={"x": _value(rng)}),),
    }
    _same_bytes(built(TestResult, values))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("score", 1),  # an int in a float field: pydantic writes 1.0
        ("score", True),
        ("duration_ms", 2**53),
        ("epochs", True),  # a bool in an int field: pydantic writes 1
        ("epochs", 2.0),
        ("line", Level.HIGH),
        ("trial_counts", {"passed": True}),
        ("trial_counts", {"passed": 1.5}),
        ("labels", ["a", "b"]),  # a list in a tuple field: the same
        ("metrics", {1: "int key"}),
        ("metrics", {"big": 2**80}),
        ("metrics", {"when": datetime.datetime(2026, 12, 7, tzinfo=datetime.UTC)}),  # orjson: +00:00
    ],
)
@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's, about the value's type
def test_values_not_of_their_fields_type_give_pydantics_bytes(field, value):
    # `built` takes the engine's word for its values' types; whatever it was given, the text
    # is what pydantic writes
    _same_bytes(built(TestResult, _result_values() | {field: value}))


def test_only_the_fields_are_written():
    signal = Signal(kind="metric", name="m", value=1.5)
    object.__setattr__(signal, "_note", "not this either")  # kept beside the fields
    assert "_note" in signal.__dict__
    _same_bytes(signal)
    _same_bytes(replaced(signal, {"value": 2.5}))


def test_a_remembered_text_is_written_as_it_is_and_never_outlives_its_object():
    result = built(TestResult, _result_values())
    run = result.run
    assert run is not None
    expected = _same_bytes(result)
    # what a connector's secrets check keeps: the run's own text, written inside its result as it is
    run.remember_json(model_json(run).decode())
    assert model_json(result) == expected
    run.remember_json('{"remembered":true}')  # (never true of a run: shows where the text goes)
    assert b'"run":{"remembered":true},' in model_json(result)
    result.remember_json('{"result":1}')
    assert model_json(result) == b'{"result":1}' and result.json_text() == '{"result":1}'
    # a copy, made either way, is encoded from its fields
    for copy in (replaced(run, {}), run.model_copy()):
        assert model_json(copy) == copy.__pydantic_serializer__.to_json(copy) != b'{"remembered":true}'
    assert model_json(result.model_copy()) != b'{"result":1}'
    result.forget_json()
    run.forget_json()
    run.forget_json()  # forgetting twice is nothing
    assert model_json(result) == expected


class Aliased(BaseModel):
    value: int = Field(1, serialization_alias="v")


class Computed(BaseModel):
    value: int = 1

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.value * 2


class Serialized(BaseModel):
    when: float = 1.0

    @field_serializer("when")
    def _when(self, value: float) -> str:
        return f"t={value}"


class Excluded(BaseModel):
    shown: int = 1
    hidden: int = Field(2, exclude=True)


class Constants(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")
    value: float = float("nan")


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    value: int = 1


class Dated(BaseModel):
    when: datetime.datetime = datetime.datetime(2026, 12, 7, 1, 2, 3, tzinfo=datetime.UTC)
    colours: set[str] = {"red"}


class Parent(BaseModel):
    a: int = 1


class Child(Parent):
    b: int = 2


class Holder(BaseModel):
    parent: Parent  # a Child here is written with Parent's fields only
    anything: Any = None


@pytest.mark.parametrize(
    "model",
    [
        Aliased(),
        Computed(),
        Serialized(),
        Excluded(),
        Constants(),
        Extra(value=2, more="x"),  # type: ignore[call-arg]
        Dated(),
        Child(),
        Holder(parent=Child()),
        Holder(parent=Parent(), anything=Child()),
        Holder(parent=Parent(), anything=Dated()),
    ],
    ids=lambda m: type(m).__name__,
)
def test_models_orjson_would_write_differently_are_written_by_pydantic(model):
    _same_bytes(model)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "values",
    [{"name": "lone \ud800 surrogate"}, {"metrics": _nested(300)}],  # no UTF-8; past both writers' depth
    ids=["surrogate", "nesting"],
)
def test_what_pydantic_cannot_write_fails_as_it_did(values):
    bad = built(TestResult, _result_values() | values)
    with pytest.raises(Exception) as from_pydantic:
        bad.__pydantic_serializer__.to_json(bad)
    with pytest.raises(type(from_pydantic.value)) as from_here:
        model_json(bad)
    assert from_here.value.__context__ is None  # pydantic's error, not one raised while handling orjson's
