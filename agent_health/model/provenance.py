"""Provenance: what produced a stored result and each of its verdicts, so a score can be traced to
the harness, the test definition, the agent version's settings and the judge that gave it."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

JudgeKind = Literal["demo", "llm", "rubric", "custom"]


@cache
def harness_version() -> str:
    """The installed agent-health version ('' when it runs from a source tree that is not installed)."""
    try:
        return version("agent-health")
    except PackageNotFoundError:
        return ""


class JudgeIdentity(BaseModel):
    """Who gave one verdict, precisely enough to tell two judgements apart or to reproduce one."""

    model_config = ConfigDict(frozen=True)

    provider: str = Field(description="Who answered: demo, openai, bedrock, a named provider, or python (in-process).")
    model: str | None = Field(None, description="Judge model id, when a model answered.")
    endpoint: str | None = Field(None, description="Where the model was reached (credentials removed), if remote.")
    evaluator: str = Field(
        description="builtin:contextual or builtin:agentic (the LLM judge), demo, or the custom evaluator's "
        "or rubric's name."
    )
    kind: JudgeKind = Field(description="demo heuristic, built-in llm judge, rubric, or custom evaluator.")
    definition_hash: str | None = Field(
        None,
        description="Hash of the evaluator's definition: the LLM judge's prompt and limits, the rubric, the custom "
        "function's source, the demo heuristic's version and threshold.",
    )
    prompt_version: str | None = Field(None, description="Version of the judge prompt template, when one was used.")
    cache_keys: tuple[str, ...] = Field(
        (),
        description="Judge-cache keys behind the verdict: the verdict's own key (LLM judge), or each `llm` "
        "completion's (rubrics, custom evaluators); empty when nothing is cacheable.",
    )

    @property
    def label(self) -> str:
        """`provider:model (evaluator)`, for tables and metadata."""
        who = f"{self.provider}:{self.model}" if self.model else self.provider
        return who if self.evaluator in (self.provider, "demo") else f"{who} ({self.evaluator})"


class Provenance(BaseModel):
    """What produced a result: filled by the engine when it builds the result."""

    model_config = ConfigDict(frozen=True)

    harness_version: str = Field("", description="agent-health version that ran the test body and judges.")
    eval_file: str = Field("", description="Eval file of the test, relative to the eval root.")
    content_hash: str = Field("", description="Hash of the test definition the body ran from.")
    agent_settings_hash: str = Field(
        "", description="Hash of the agent version's effective settings, secrets excluded (env references by name)."
    )
    judge_settings_hash: str = Field("", description="Hash of the judge settings the run used (config.judge).")
    agent_eval_run_id: str | None = Field(
        None, description="The evaluation run that ran the agent: the result's own run, or the one re-judged."
    )
    judged_at: float = Field(0.0, description="Unix time the verdicts of this result were made.")
    uncalibrated_judges: tuple[str, ...] = Field(
        (),
        description="Judges whose gating verdicts here did not gate because they miss judge.calibration, each as "
        "'<judge>: <why>' (rollups and the Dagster checks read it from the stored summary).",
    )
    calibrated_judges: tuple[str, ...] = Field(
        (), description="Judges whose gating verdicts here gated because they meet judge.calibration."
    )
