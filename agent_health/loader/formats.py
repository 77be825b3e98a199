"""The data test-case formats as pydantic models (the test options both kinds of test share are in
`agent_health.loader.options`).

Every field is validated, so a wrong type anywhere (`labels: 5`, `timeout: "soon"`, `epochs: 0`,
a list where an object is expected) is one clear error naming the case and the field instead of a
crash. A single value where a list is expected (`labels: smoke`, `expected_tools: search_logs`,
one context object) is taken as a one-element list, never split into characters.

Two formats, whose field names may be mixed (docs/eval-files.md):
- native (`prompt`, `expected_tools`, ...): unknown fields are errors, so a typo such as
  `expected_tool` cannot silently drop a check;
- agent-health's exported format (a case with `initialPrompt`): unknown fields are ignored, as the
  export carries bookkeeping fields of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AliasChoices, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from agent_health.loader.options import CaseModel, CostUSD, Epochs, Strings, Timeout, no_bool, one_or_many
from agent_health.model import ContextItem, ExpectedStep
from agent_health.model.case import context_fields
from agent_health.model.conversation import SimulatedUser
from agent_health.model.limits import TURNS_MAX


class ContextEntry(CaseModel):
    """One context item: `{description, value}`, or `{type, content}` as agent-health's sample test
    cases write it (`context_fields`); any other key is an error naming it. A non-string value is
    sent as its JSON."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("", description="What this context is, e.g. 'Error log' (`type` in the samples).")
    value: Any = Field("", description="The content (`content` in the samples); objects and lists are sent as JSON.")

    @model_validator(mode="before")
    @classmethod
    def _either_shape(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        description, value = context_fields(raw)
        return {"description": description, "value": value}

    def item(self) -> ContextItem:
        value = self.value if isinstance(self.value, str) else json.dumps(self.value, sort_keys=True, default=str)
        return ContextItem(description=self.description, value=value)


class StepEntry(CaseModel):
    """One expected trajectory step."""

    model_config = ConfigDict(extra="ignore")

    step: Annotated[int, BeforeValidator(no_bool)] | None = Field(None, description="Step number, informational.")
    description: str = Field("", description="What the agent should do at this step.")
    required_tools: Strings = Field(
        (), validation_alias=AliasChoices("required_tools", "requiredTools"), description="Tools it must call."
    )


Contexts = Annotated[tuple[ContextEntry, ...], BeforeValidator(one_or_many)]
Steps = Annotated[tuple[StepEntry, ...], BeforeValidator(one_or_many)]


class CaseFields(CaseModel):
    """Every field a data test case (or a file's `defaults`) may set, in either spelling."""

    id: str | None = Field(
        None, description="The case's own id (agent-health's export); names the test without a name."
    )
    name: str | None = Field(None, description="Test name; the test id is derived from it.")
    description: str | None = None
    category: str | None = Field(None, description="Becomes the label `category:<value>`.")
    difficulty: str | None = Field(None, description="Becomes the label `difficulty:<value>`.")
    labels: Strings = Field((), description="Labels; one string is one label.")
    tags: Strings = Field((), description="More labels (agent-health's export).")
    prompt: str | None = Field(
        None, validation_alias=AliasChoices("prompt", "initialPrompt"), description="The prompt sent to the agent."
    )
    context: Contexts = Field((), description="Context items sent with the prompt.")
    turns: Strings = Field(
        (), description="The user's next messages after the prompt, each sent once the agent answered (a conversation)."
    )
    user: SimulatedUser | None = Field(
        None, description="A simulated user holding the conversation: goal, persona, facts, opening, max_turns, model."
    )
    expected_outcomes: Strings = Field(
        (), validation_alias=AliasChoices("expected_outcomes", "expectedOutcomes"), description="Each one is judged."
    )
    expected_trajectory: Steps = Field(
        (), validation_alias=AliasChoices("expected_trajectory", "expectedTrajectory"), description="Expected steps."
    )
    expected_tools: Strings = Field(
        (), validation_alias=AliasChoices("expected_tools", "expectedTools"), description="Tools that must be called."
    )
    timeout: Timeout | None = Field(None, description="Per-test timeout in seconds (> 0).")
    epochs: Epochs | None = Field(None, description="Independent trials (>= 1).")
    skip_judge: bool | None = Field(None, validation_alias=AliasChoices("skip_judge", "skipJudge"))
    max_cost_usd: CostUSD | None = Field(
        None,
        validation_alias=AliasChoices("max_cost_usd", "maxCostUsd"),
        description="Cost cap in USD: the test ends errored when its spend passes it.",
    )

    @field_validator("prompt")
    @classmethod
    def _prompt_text(cls, value: str | None) -> str | None:
        return value.strip() if value is not None else None

    @field_validator("turns")
    @classmethod
    def _turns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        value = tuple(t.strip() for t in value)
        if any(not t for t in value):
            raise ValueError(f"turn {[bool(t) for t in value].index(False) + 2} is empty")
        if len(value) + 1 > TURNS_MAX:
            raise ValueError(f"{len(value) + 1} turns; a conversation has at most {TURNS_MAX} (TURNS_MAX)")
        return value

    @model_validator(mode="after")
    def _one_user_side(self) -> CaseFields:
        if self.turns and self.user is not None:
            raise ValueError("give turns (a script) or user (a simulated user), not both")
        return self


class NativeCase(CaseFields):
    """A case of the native format: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class ExportedCase(CaseFields):
    """A case of agent-health's exported format (it has `initialPrompt`): unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


class Defaults(CaseFields):
    """A native file's `defaults`, merged under every case."""

    model_config = ConfigDict(extra="forbid")


def case_model(raw: Mapping[str, Any]) -> type[CaseFields]:
    return ExportedCase if "initialPrompt" in raw else NativeCase


def steps_of(steps: tuple[StepEntry, ...]) -> tuple[ExpectedStep, ...]:
    return tuple(
        ExpectedStep(
            step=s.step if s.step is not None else i, description=s.description, required_tools=s.required_tools
        )
        for i, s in enumerate(steps, start=1)
    )
