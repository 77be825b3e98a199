"""An evaluation run: one CLI invocation or one Dagster run, with what it ran and how it ended.

Stores keep every run's manifest and its results (see `agent_health.stores`), so a run can be
reported, compared or re-judged later by its id, and one killed mid-way keeps what finished.
"""

from __future__ import annotations

import os
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.report import BudgetSpend, RunSummary
from agent_health.model.result import SCHEMA_VERSION
from agent_health.model.settings import RunSettings

RunStatus = Literal["running", "finished", "interrupted"]


def new_run_id(now: float | None = None) -> str:
    """Sortable and unique: `YYYYMMDDTHHMMSS-<8 hex>` (UTC)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{os.urandom(4).hex()}"


class EvalRun(BaseModel):
    """The manifest of one evaluation run. Written when the run starts and again when it ends;
    a run that never wrote its end (killed) reads back as `running` with its results so far."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = Field(SCHEMA_VERSION, description="Version of this schema.")
    id: str = Field(default_factory=new_run_id, description="Run id, sortable by start time.")
    transport: Literal["cli", "dagster", "api"] = Field("api", description="What started the run.")
    status: RunStatus = Field("running", description="running until the run ends; interrupted on Ctrl-C.")
    started_at: float = Field(default_factory=time.time, description="Unix time the run started.")
    finished_at: float | None = Field(None, description="Unix time the run ended; None while running.")
    harness_version: str = Field("", description="agent-health version that ran it.")
    settings: RunSettings = Field(default_factory=RunSettings, description="The run's settings (no secrets).")
    agents: tuple[str, ...] = Field((), description="Agent versions the run covered, as KEY@VERSION.")
    tests: int = Field(0, description="Tests selected per agent version.")
    summaries: tuple[RunSummary, ...] = Field((), description="One per agent version, when the run ended.")
    not_run: dict[str, int] = Field(
        default_factory=dict, description="Agent version -> tests never started (fail-fast, interruption)."
    )
    not_run_reason: str | None = Field(
        None, description="Why tests were not run: 'budget reached', 'fail-fast' or 'interrupted'."
    )
    budget: BudgetSpend | None = Field(None, description="Spend against the budget, when the run had one.")
    load_errors: tuple[str, ...] = Field((), description="Eval files or tests that failed to load.")
    hook_errors: tuple[str, ...] = Field((), description="after_all hooks that failed.")
    warnings: tuple[str, ...] = Field(
        (), description="Gating judges demoted to observe (or refused) because they miss judge.calibration."
    )
    rejudge_of: str | None = Field(
        None,
        description="For a re-judging run: what it re-judged (a run id, an agent version's latest results, a store).",
    )
