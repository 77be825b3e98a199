"""The one resource: where the project is, the run settings of evaluation runs, and the limits
the checks enforce. Every field falls back to an environment variable, so `dagster dev` from the
project root needs no config; a run's own config (`EvaluateConfig`) overrides the run settings.

Precedence (as for the CLI, see docs/running.md): a test's own `timeout=` / `epochs=`, then the
run config, then the resource (or its environment variables), then the configuration file, then
the built-in defaults."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from dagster import Config, ConfigurableResource
from pydantic import Field

from agent_health.errors import ConfigError
from agent_health.pipeline import Project, RunSettings, Thresholds, build_settings, env_number


class BudgetConfig(Config):
    """A spend budget (docs/budgets.md): once the next test could pass it, the run starts no more
    tests and the rest are reported as not run, "budget reached"."""

    max_cost_usd: float | None = Field(None, gt=0, description="Agent and judge spend together, in USD.")
    max_judge_cost_usd: float | None = Field(None, gt=0, description="Judge spend alone, in USD.")
    max_tokens: int | None = Field(None, ge=1, description="Agent and judge tokens together.")


def _budget(config: BudgetConfig | None) -> dict[str, Any] | None:
    return config.model_dump(exclude_none=True) or None if config is not None else None


class EvaluateConfig(Config):
    """Run settings of one evaluation run (the Launchpad's config of an `evaluate__*` step).
    Unset fields come from the resource, then the configuration file."""

    concurrency: int | None = Field(None, ge=1, description="Tests in flight at once, over all agent versions.")
    timeout_s: float | None = Field(None, gt=0, description="Per-test timeout for tests without their own.")
    epochs: int | None = Field(None, ge=1, description="Trials per test for tests without their own.")
    skip_judge: bool | None = Field(None, description="Skip every judge() call (neutral verdicts).")
    judge_model: str | None = Field(None, description="Judge model for this run (`provider:model`).")
    replay: str | None = Field(None, description="Record/replay mode: off, record, auto or strict.")
    budget: BudgetConfig | None = Field(
        None, description="Spend budget of this run: max_cost_usd, max_judge_cost_usd, max_tokens."
    )


class AgentHealthResource(ConfigurableResource):  # type: ignore[type-arg]  # Dagster's idiom: the resource is its own value
    """agent-health project settings for the code location."""

    config_path: str | None = Field(
        None, description="agent_health_config.py (else $AGENT_HEALTH_CONFIG, else found from the working directory)."
    )
    eval_root: str | None = Field(
        None, description="Eval root override (else $AGENT_HEALTH_EVAL_ROOT, else the configuration's eval_root)."
    )
    state_dir: str | None = Field(None, description="State folder override (results live in <state>/results).")
    concurrency: int | None = Field(
        default=None, description="Tests in flight at once over all agent versions of a run (else the configuration's)."
    )
    timeout_s: float | None = Field(default=None, description="Per-test timeout (else the configuration's timeout_s).")
    epochs: int | None = Field(default=None, description="Trials per test (else 1).")
    skip_judge: bool | None = Field(
        default=None, description="Skip every judge() call (else $AGENT_HEALTH_SKIP_JUDGE)."
    )
    judge_model: str | None = Field(default=None, description="Judge model for every run (`provider:model`).")
    replay: str | None = Field(
        default=None, description="Record/replay mode (else $AGENT_HEALTH_REPLAY, else the config's)."
    )
    budget: BudgetConfig | None = Field(
        default=None, description="Spend budget of every run (else the configuration's budget)."
    )
    min_pass_rate: float = Field(0.5, description="Rollup check: pass rate at least this (0..1).")
    suite_min_pass_rate: dict[str, float] = Field(
        default_factory=dict, description="Per-suite pass-rate thresholds (suite -> 0..1)."
    )
    max_errored_share: float = Field(0.1, description="Rollup check: errored share at most this (0..1).")
    baseline: str | None = Field(
        None,
        description="Baseline agent version of every comparison and regression check (default: the version "
        "registered just before the candidate).",
    )

    def project(self) -> Project:
        """The project (cached per process; reloaded when the configuration file changes)."""
        return Project.load(self.config_path, self.eval_root, self.state_dir)

    def run_settings(self, run: EvaluateConfig | None = None, more: Mapping[str, Any] | None = None) -> RunSettings:
        """The typed settings of an evaluation run, built by the CLI's builder: the run's config
        (and `more` settings of another job's run config, as `build_settings` names them), then this
        resource, then the environment, then the configuration file, then defaults."""
        fields = ("concurrency", "timeout_s", "epochs", "skip_judge", "judge_model", "replay")
        overrides: dict[str, Any] = {name: getattr(self, name) for name in fields}
        budget = _budget(self.budget) or {}
        if run is not None:
            overrides.update({name: getattr(run, name) for name in fields if getattr(run, name) is not None})
            budget.update(_budget(run.budget) or {})  # the run's limits over the resource's, one by one
        more = dict(more or {})
        if isinstance(more.get("budget"), BudgetConfig):
            budget.update(_budget(more.pop("budget")) or {})
        overrides["budget"] = budget or None
        overrides.update({name: value for name, value in more.items() if value is not None})
        return build_settings(self.project().config, overrides)

    def thresholds(self) -> Thresholds:
        return Thresholds(
            min_pass_rate=self.min_pass_rate,
            suite_min_pass_rate=dict(self.suite_min_pass_rate),
            max_errored_share=self.max_errored_share,
        )


def resource_from_env() -> AgentHealthResource:
    """The resource as configured by environment variables (see the README). Run settings
    (AGENT_HEALTH_CONCURRENCY, ..._TIMEOUT, ..._EPOCHS, ...) are read by `build_settings` when a run
    starts, as the CLI reads them."""
    suites = os.environ.get("AGENT_HEALTH_SUITE_MIN_PASS_RATE")
    try:
        per_suite = {str(k): float(v) for k, v in json.loads(suites).items()} if suites else {}
    except (ValueError, AttributeError):
        raise ConfigError(
            f'$AGENT_HEALTH_SUITE_MIN_PASS_RATE must be a JSON object like {{"rca/payments": 0.8}}, got {suites!r}'
        ) from None
    return AgentHealthResource(
        config_path=os.environ.get("AGENT_HEALTH_CONFIG") or None,
        eval_root=os.environ.get("AGENT_HEALTH_EVAL_ROOT") or None,
        state_dir=os.environ.get("AGENT_HEALTH_STATE_DIR") or None,
        min_pass_rate=env_number("AGENT_HEALTH_MIN_PASS_RATE", 0.5, 0, 1) or 0.0,
        suite_min_pass_rate=per_suite,
        max_errored_share=env_number("AGENT_HEALTH_MAX_ERRORED_SHARE", 0.1, 0, 1) or 0.0,
        baseline=os.environ.get("AGENT_HEALTH_BASELINE") or None,
    )
