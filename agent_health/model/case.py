"""Test case definitions: what a test is, independent of how it runs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.conversation import SimulatedUser
from agent_health.model.validation import did_you_mean


class ContextItem(BaseModel):
    """One piece of context handed to the agent with the prompt (agent-health's `{description, value}`)."""

    model_config = ConfigDict(frozen=True)

    description: str = Field("", description="What this context is, e.g. 'Error log'.")
    value: str = Field("", description="The context content itself.")


class ExpectedStep(BaseModel):
    """One expected trajectory step (agent-health's `expectedTrajectory` item)."""

    model_config = ConfigDict(frozen=True)

    step: int | None = Field(None, description="Step number, informational.")
    description: str = Field("", description="What the agent should do at this step.")
    required_tools: tuple[str, ...] = Field((), description="Tools the agent must call for this step.")


class TestCase(BaseModel):
    """A discovered test: metadata only, never an instruction to run anything.

    `id` is stable (suite plus the test's name) and is a valid Dagster partition key;
    `content_hash` changes whenever the test's definition (options, body source) changes.
    """

    model_config = ConfigDict(frozen=True)
    __test__ = False  # keep pytest from collecting this class

    id: str = Field(description="Stable id: '<suite>::<test-slug>'.")
    name: str = Field(description="Full test name; describe() groups are joined with ' > '.")
    suite: str = Field(description="The eval file's path relative to the eval root, without extension.")
    source_file: str = Field(description="Path of the eval file, relative to the eval root.")
    line: int | None = Field(None, description="Line of the test definition in the source file.")
    kind: Literal["code", "data"] = Field("code", description="A Python test body or a data test case.")
    description: str | None = Field(None, description="Free-text description.")
    labels: tuple[str, ...] = Field((), description="Labels such as 'category:RCA' or 'difficulty:Hard'.")
    prompt: str | None = Field(None, description="Default prompt for agent.run(); None for dynamic prompts.")
    context: tuple[ContextItem, ...] = Field((), description="Default context for agent.run().")
    turns: tuple[str, ...] = Field(
        (), description="The user's next messages after the prompt, for a conversation (data tests)."
    )
    user: SimulatedUser | None = Field(None, description="A simulated user holding the conversation (data tests).")
    expected_outcomes: tuple[str, ...] = Field((), description="Outcomes a judge checks (data tests).")
    expected_trajectory: tuple[ExpectedStep, ...] = Field((), description="Expected steps and required tools.")
    timeout_s: float | None = Field(None, description="Per-test timeout in seconds; None uses the run default.")
    skip_judge: bool | None = Field(None, description="True skips every judge() call in this test.")
    epochs: int | None = Field(None, description="Independent trials for this test; None uses the run default.")
    max_cost_usd: float | None = Field(
        None, description="Cost cap in USD: a test whose agent or judge spend passes it ends errored."
    )
    content_hash: str = Field("", description="sha256 of the test's definition; changes when the test changes.")


def _share_field_names(model: type[BaseModel]) -> None:
    """Enter the field names into the keys CPython shares between the instances of `model` that
    keep their attributes in themselves (see `compact_case`), before any instance exists: the
    interpreter takes fewer keys into them with each instance made, and pydantic makes instances
    without them, so keys entered later (after a run has read stored cases) might not fit."""
    probe = object.__new__(model)
    for name in model.model_fields:
        object.__setattr__(probe, name, None)


_share_field_names(TestCase)
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def _shared_fields_set(names: set[str]) -> set[str]:
    """One set for every model that gave these fields (pydantic keeps one per model: about 700
    bytes for a TestCase). A frozen model's set is never added to; `model_copy` copies it."""
    return _FIELDS_SETS.setdefault(frozenset(names), set(names))


def share_fields_set(model: BaseModel) -> None:
    """Make the set of explicitly given field names of a frozen `model` the one set shared by
    every model that gave the same fields."""
    shared = _shared_fields_set(model.model_fields_set)
    if model.model_fields_set is not shared:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


def shared_value(value: Any, shared: dict[Any, Any]) -> Any:
    """`value`, or an equal one met before (`shared` remembers them): each text, tuple of texts
    and step, with the texts inside tuples and steps shared too. The values are immutable, so
    sharing them changes nothing but memory."""
    if not isinstance(value, (str, tuple, ExpectedStep, ContextItem)):
        return value
    try:
        found = shared.get(value)
    except TypeError:  # unhashable after all: kept as it is
        return value
    if found is not None:  # met before (most values of a suite's second and later tests): nothing to build
        return found
    if isinstance(value, tuple):
        items = tuple(shared_value(v, shared) for v in value)
        # a new tuple only when an item was replaced: an equal, distinct one kept instead made
        # every later lookup of the original compare the two with pydantic's `__eq__` (a step's)
        if any(a is not b for a, b in zip(items, value)):
            value = items
    elif isinstance(value, ExpectedStep):
        tools = shared_value(value.required_tools, shared)
        if tools is not value.required_tools:
            value = value.model_copy(update={"required_tools": tools})
    if isinstance(value, BaseModel):  # kept for good: its set of given fields shared too, once
        share_fields_set(value)
    return shared.setdefault(value, value)


_UNIQUE = frozenset({"id", "name", "content_hash", "line"})  # one test's own: never shared


def compact_case(case: TestCase, shared: dict[Any, Any] | None = None) -> TestCase:
    """An equal, compact copy of `case`, for a loaded test (a suite of 50,000 holds 50,000).

    Pydantic gives every model its own `__dict__`, a full dict (about 500 bytes for a TestCase's
    17 fields). The copy keeps its field values in the object itself, as a plain class's instance
    does (CPython stores them in a values array whose keys the class shares), about 150 bytes;
    every read (attributes, `model_dump`, equality, `model_copy`, pickling) sees the same values.
    The sets of given field names of it, its context items and expected steps are shared, and
    with `shared` (one dict for a file's tests) its texts, tuples and steps are ones met before
    when equal: validation makes a new tuple for every case, equal or not."""
    for model in (*case.context, *case.expected_trajectory):
        share_fields_set(model)
    if case.__pydantic_extra__ or case.__pydantic_private__:  # not a TestCase's: kept as it is
        share_fields_set(case)
        return case
    copy = object.__new__(type(case))
    for name, value in case.__dict__.items():  # field order: every copy shares the class's keys
        if shared is not None and name not in _UNIQUE:
            value = shared_value(value, shared)
        object.__setattr__(copy, name, value)
    object.__setattr__(copy, "__pydantic_fields_set__", _shared_fields_set(case.model_fields_set))
    object.__setattr__(copy, "__pydantic_extra__", None)
    object.__setattr__(copy, "__pydantic_private__", None)
    return copy


# The shapes of a context item agent-health has: `{description, value}` (its test cases, exported
# and imported) and `{type, content}` (its sample test cases, which it maps to `{description: type,
# value: content}` itself). A key of neither is an error: read as `{description, value}`, such an
# item was sent as two empty strings without a word.
CONTEXT_KEYS = ("description", "value")
SAMPLE_CONTEXT_KEYS = ("type", "content")


def context_fields(item: Mapping[Any, Any]) -> tuple[Any, Any]:
    """(description, value) of a context item of either shape; a ValueError naming every key of
    neither."""
    keys = set(item)
    for shape in (CONTEXT_KEYS, SAMPLE_CONTEXT_KEYS):
        if keys <= set(shape):
            return item.get(shape[0], ""), item.get(shape[1], "")
    # the shape the item mostly uses (`{description, content}` is `{description, value}` misspelt)
    sample = len(keys & set(SAMPLE_CONTEXT_KEYS)) > len(keys & set(CONTEXT_KEYS))
    shape = SAMPLE_CONTEXT_KEYS if sample else CONTEXT_KEYS
    unknown = sorted((k for k in keys if k not in shape), key=str)
    raise ValueError(
        f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} in a context item"
        f"{did_you_mean(str(unknown[0]), shape)} (a context item is {{description, value}}, or "
        "{type, content} as in agent-health's sample test cases)"
    )


_CASE_FIELDS = tuple(TestCase.model_fields)
_ALL_GIVEN = frozenset(_CASE_FIELDS)
# A data case's fields besides its own (id, name, line, content_hash) and its prompt, in field
# order: what `data_case` takes as `rest`, one tuple for the cases of a file that share them.
CASE_REST = (
    "suite", "source_file", "kind", "description", "labels", "context", "turns", "user", "expected_outcomes",
    "expected_trajectory", "timeout_s", "skip_judge", "epochs", "max_cost_usd",
)  # fmt: skip
_ORDER = ("id", "name", "suite", "source_file", "line", "kind", "description", "labels", "prompt", *CASE_REST[5:])
if (*_ORDER, "content_hash") != _CASE_FIELDS:  # data_case below writes them in this order
    raise TypeError(f"TestCase's fields changed: update CASE_REST and data_case ({_CASE_FIELDS})")


def loaded_case(values: Mapping[str, Any], shared: dict[Any, Any]) -> TestCase:
    """The compact TestCase `compact_case(TestCase(**values), shared)` makes, made directly: for
    the data loader, whose `values` (every field) are already of their fields' types, validated by
    the case formats, and shared, so validating them again only rebuilt each tuple, then copied
    the model (about a fifth of a data case's loading)."""
    case = object.__new__(TestCase)
    for name in _CASE_FIELDS:  # field order: every case shares the class's keys
        object.__setattr__(case, name, values[name])
    given = _FIELDS_SETS.get(_ALL_GIVEN) or _shared_fields_set(set(_ALL_GIVEN))
    object.__setattr__(case, "__pydantic_fields_set__", given)
    object.__setattr__(case, "__pydantic_extra__", None)
    object.__setattr__(case, "__pydantic_private__", None)
    return case  # its context items and steps are shared values: their sets of fields are shared


def data_case(
    id: str, name: str, line: int | None, content_hash: str, prompt: str | None, rest: tuple[Any, ...]
) -> TestCase:
    """The TestCase of a loaded data case, from its own fields, its prompt and the rest of its
    fields (`CASE_REST`), all already of their fields' types (validated by the case formats):
    what `loaded_case` makes from the same values, made when asked for instead of kept for every
    loaded case (`agent_health.loader.types.LoadedDataTest`), in about a microsecond."""
    suite, source_file, kind, description, labels, context, turns, user, outcomes, steps, timeout, skip, epochs, cap = (
        rest
    )
    case = object.__new__(TestCase)
    object.__setattr__(
        case,
        "__dict__",
        {
            "id": id,
            "name": name,
            "suite": suite,
            "source_file": source_file,
            "line": line,
            "kind": kind,
            "description": description,
            "labels": labels,
            "prompt": prompt,
            "context": context,
            "turns": turns,
            "user": user,
            "expected_outcomes": outcomes,
            "expected_trajectory": steps,
            "timeout_s": timeout,
            "skip_judge": skip,
            "epochs": epochs,
            "max_cost_usd": cap,
            "content_hash": content_hash,
        },
    )
    object.__setattr__(
        case, "__pydantic_fields_set__", _FIELDS_SETS.get(_ALL_GIVEN) or _shared_fields_set(set(_ALL_GIVEN))
    )
    object.__setattr__(case, "__pydantic_extra__", None)
    object.__setattr__(case, "__pydantic_private__", None)
    return case


def to_context(items: Iterable[Any] | None) -> tuple[ContextItem, ...]:
    """Accept ContextItems, dicts of either shape (`context_fields`), or plain strings; a dict
    with other keys is a ValueError naming the item (`context[1]`) and the keys."""
    out = []
    for i, item in enumerate(items or ()):
        if isinstance(item, ContextItem):
            out.append(item)
        elif isinstance(item, Mapping):
            try:
                description, value = context_fields(item)
            except ValueError as exc:
                raise ValueError(f"context[{i}]: {exc}") from None
            out.append(ContextItem(description=str(description), value=_as_text(value)))
        else:
            out.append(ContextItem(description="", value=_as_text(item)))
    return tuple(out)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def to_expected_steps(items: Iterable[Any] | None) -> tuple[ExpectedStep, ...]:
    out = []
    for i, item in enumerate(items or (), start=1):
        if isinstance(item, ExpectedStep):
            out.append(item)
        elif isinstance(item, Mapping):
            tools = item.get("required_tools", item.get("requiredTools", ())) or ()
            if isinstance(tools, str):  # one tool, never its characters
                tools = (tools,)
            out.append(
                ExpectedStep(
                    step=item.get("step", i), description=str(item.get("description", "")), required_tools=tuple(tools)
                )
            )
        else:
            out.append(ExpectedStep(step=i, description=str(item)))
    return tuple(out)
