"""The one resource: where the project is and the limits its checks enforce. Every field falls
back to an environment variable, so `dagster dev` from the project root needs no config."""

from __future__ import annotations

import json
import os

from dagster import ConfigurableResource
from pydantic import Field

from agent_health.model import RunSettings
from agent_health.pipeline import Project, Thresholds


class AgentHealthResource(ConfigurableResource):
    """agent-health project settings for the code location."""

    config_path: str | None = Field(
        None, description="agent_health_config.py (else $AGENT_HEALTH_CONFIG, else found from the working directory)."
    )
    eval_root: str | None = Field(
        None, description="Eval root override (else $AGENT_HEALTH_EVAL_ROOT, else the configuration's eval_root)."
    )
    state_dir: str | None = Field(None, description="State folder override (results live in <state>/results).")
    concurrency: int | None = Field(
        None, description="Tests in flight per agent version within one run (else the configuration's concurrency)."
    )
    min_pass_rate: float = Field(0.5, description="Rollup check: pass rate at least this (0..1).")
    suite_min_pass_rate: dict[str, float] = Field(
        default_factory=dict, description="Per-suite pass-rate thresholds (suite -> 0..1)."
    )
    max_errored_share: float = Field(0.1, description="Rollup check: errored share at most this (0..1).")
    baseline: str | None = Field(
        None,
        description="Baseline agent version for comparisons and regression "
        "checks (default: the previous / second-newest version).",
    )
    candidate: str | None = Field(None, description="Candidate agent version for the comparison (default: the newest).")

    def project(self) -> Project:
        return Project.load(self.config_path, self.eval_root, self.state_dir)

    def run_settings(self) -> RunSettings:
        """The typed settings of the runs this resource starts (the same model the CLI builds)."""
        config = self.project().config
        return RunSettings(concurrency=self.concurrency or config.concurrency, timeout_s=config.timeout_s)

    def thresholds(self) -> Thresholds:
        return Thresholds(
            min_pass_rate=self.min_pass_rate,
            suite_min_pass_rate=dict(self.suite_min_pass_rate),
            max_errored_share=self.max_errored_share,
        )


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"${name} must be a number between 0 and 1, got {raw!r}") from None


def resource_from_env() -> AgentHealthResource:
    """The resource as configured by environment variables (see the README)."""
    suites = os.environ.get("AGENT_HEALTH_SUITE_MIN_PASS_RATE")
    try:
        per_suite = {str(k): float(v) for k, v in json.loads(suites).items()} if suites else {}
    except (ValueError, AttributeError):
        raise ValueError(
            f'$AGENT_HEALTH_SUITE_MIN_PASS_RATE must be a JSON object like {{"rca/payments": 0.8}}, got {suites!r}'
        ) from None
    concurrency = os.environ.get("AGENT_HEALTH_CONCURRENCY")
    return AgentHealthResource(
        config_path=os.environ.get("AGENT_HEALTH_CONFIG") or None,
        eval_root=os.environ.get("AGENT_HEALTH_EVAL_ROOT") or None,
        state_dir=os.environ.get("AGENT_HEALTH_STATE_DIR") or None,
        concurrency=int(concurrency) if concurrency else None,
        min_pass_rate=_float("AGENT_HEALTH_MIN_PASS_RATE", 0.5),
        suite_min_pass_rate=per_suite,
        max_errored_share=_float("AGENT_HEALTH_MAX_ERRORED_SHARE", 0.1),
        baseline=os.environ.get("AGENT_HEALTH_BASELINE") or None,
        candidate=os.environ.get("AGENT_HEALTH_CANDIDATE") or None,
    )
