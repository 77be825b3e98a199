"""Run eval source through the real loader and the one run path, in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_health import RunOutcome, RunSettings, Signal, TestResult, load_config, load_tests, run_evaluation
from agent_health.judges.service import JudgeService
from agent_health.reporters.base import CallbackReporter


def body_signals(result: TestResult) -> list[Signal]:
    """The signals the body recorded (without the derived metric signals every run adds)."""
    return [s for s in result.signals if s.kind != "metric"]


def settings_of(
    agent: str = "demo@v2", skip_judge: bool = False, judge: dict[str, Any] | None = None, **options: Any
) -> RunSettings:
    """RunSettings for one agent version, not stored, from engine-style keyword options."""
    return RunSettings(agents=(agent,), judge={"skip": skip_judge, **(judge or {})}, store=None, **options)


def run_engine(
    tests, agent: str = "demo@v2", judges: JudgeService | None = None, config=None, **options: Any
) -> tuple[dict[str, TestResult], RunOutcome]:
    """Results by test name, and the run's outcome (not run counts, hook errors)."""
    out: dict[str, TestResult] = {}

    def keep(r: TestResult) -> None:
        out[r.name] = r

    outcome = asyncio.run(
        run_evaluation(
            tests,
            config or load_config(),
            settings_of(agent, **options),
            reporters=[CallbackReporter(keep)],
            judges=judges,
        )
    )
    return out, outcome


def run_dir(path: Path, agent: str = "demo@v2", judges: JudgeService | None = None, **options) -> dict[str, TestResult]:
    loaded = load_tests([path])
    assert not loaded.errors, loaded.errors
    return run_engine(loaded.tests, agent, judges, **options)[0]
