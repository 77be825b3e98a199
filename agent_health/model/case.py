"""Test case definitions: what a test is, independent of how it runs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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
    expected_outcomes: tuple[str, ...] = Field((), description="Outcomes a judge checks (data tests).")
    expected_trajectory: tuple[ExpectedStep, ...] = Field((), description="Expected steps and required tools.")
    timeout_s: float | None = Field(None, description="Per-test timeout in seconds; None uses the run default.")
    skip_judge: bool | None = Field(None, description="True skips every judge() call in this test.")
    epochs: int | None = Field(None, description="Independent trials for this test; None uses the run default.")
    max_cost_usd: float | None = Field(
        None, description="Cost cap in USD: a test whose agent or judge spend passes it ends errored."
    )
    content_hash: str = Field("", description="sha256 of the test's definition; changes when the test changes.")


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def share_fields_set(model: BaseModel) -> None:
    """Make the set of explicitly given field names of a frozen `model` (pydantic keeps one per
    model: about 700 bytes for a TestCase, half of a loaded test) one set shared by every model
    that gave the same fields. A frozen model's set is never added to; `model_copy` copies it."""
    names = model.model_fields_set
    shared = _FIELDS_SETS.setdefault(frozenset(names), set(names))
    if names is not shared:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


def compact_case(case: TestCase) -> TestCase:
    """`case`, with the field-name sets of it, its context items and expected steps shared
    (`share_fields_set`): what a suite of 50,000 loaded tests holds per test shrinks by half."""
    for model in (case, *case.context, *case.expected_trajectory):
        share_fields_set(model)
    return case


def to_context(items: Iterable[Any] | None) -> tuple[ContextItem, ...]:
    """Accept ContextItems, `{description, value}` dicts, or plain strings."""
    out = []
    for item in items or ():
        if isinstance(item, ContextItem):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(ContextItem(description=str(item.get("description", "")), value=_as_text(item.get("value", ""))))
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
