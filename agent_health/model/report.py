"""The JSON report of one CLI run: every result plus per-agent summaries (versioned)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_health.model.result import SCHEMA_VERSION, TestResult


class RunSummary(BaseModel):
    """Counts and totals over a set of results. Pass rate excludes errored tests."""

    agent: str = ""
    total: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    pass_rate: float | None = Field(None, description="passed / (passed + failed); None when nothing graded.")
    mean_score: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    judge_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = Field(0.0, description="Wall-clock time of this agent's run.")

    @classmethod
    def of(cls, agent: str, results: list[TestResult], duration_ms: float = 0.0) -> RunSummary:
        passed = sum(r.status == "passed" for r in results)
        failed = sum(r.status == "failed" for r in results)
        scores = [r.score for r in results if r.score is not None]
        return cls(
            agent=agent,
            total=len(results),
            passed=passed,
            failed=failed,
            errored=sum(r.status == "errored" for r in results),
            pass_rate=round(passed / (passed + failed), 4) if passed + failed else None,
            mean_score=round(sum(scores) / len(scores), 4) if scores else None,
            input_tokens=sum(r.usage.input_tokens for r in results),
            output_tokens=sum(r.usage.output_tokens for r in results),
            total_tokens=sum(r.usage.total_tokens for r in results),
            judge_tokens=sum(r.judge_usage.total_tokens for r in results),
            cost_usd=round(sum(r.cost_usd or 0.0 for r in results), 6),
            duration_ms=round(duration_ms, 1),
        )


class RunReport(BaseModel):
    """What `--reporter json` writes."""

    schema_version: int = SCHEMA_VERSION
    started_at: float
    finished_at: float
    summaries: list[RunSummary] = Field(default_factory=list, description="One per agent version.")
    results: list[TestResult] = Field(default_factory=list)
    load_errors: list[str] = Field(default_factory=list, description="Eval files or tests that failed to load.")
    hook_errors: list[str] = Field(default_factory=list, description="after_all hooks that failed.")
    not_run: int = Field(0, description="Tests not started because of --fail-fast.")
