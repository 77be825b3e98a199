"""The one resource: where the project is, the run settings of evaluation runs, and the limits
the checks enforce. Every field falls back to an environment variable, so `dagster dev` from the
project root needs no config; a run's own config (`EvaluateConfig`) overrides the run settings.

Precedence (as for the CLI, see docs/running.md): a test's own `timeout=` / `epochs=`, then the
run config, then the resource (or its environment variables), then the configuration file, then
the built-in defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import Config, ConfigurableResource
from pydantic import Field, create_model

from agent_health.errors import ConfigError
from agent_health.pipeline import (
    DeploymentSettings,
    MissingEvidence,
    Project,
    RunSettings,
    Thresholds,
    build_settings,
    declared_settings,
    deployment_settings,
)


def _fields(group: str, unset: str, job: str | None = None) -> dict[str, Any]:
    """The Dagster fields of the run settings declared with a Dagster name in `group` ("" for the
    top level; a dotted name `budget.max_tokens` is in group "budget") for `job` (any, when None),
    all optional: unset, the value comes from `unset` (from the environment or the configuration
    file, else the default, for a setting the resource does not have)."""
    out: dict[str, Any] = {}
    for d in declared_settings():
        name = d.declared.dagster or ""
        head, _, tail = name.rpartition(".")
        if not name or head != group or (job is not None and job not in d.declared.jobs):
            continue
        after = unset
        if "evaluate" not in d.declared.jobs:  # not a resource field: its sources are the ones after it
            after = "the environment, then the configuration file" if d.declared.env or d.declared.config else "all"
        kind = str if d.choices is not None or d.annotation not in (bool, int, float) else d.annotation
        kind = list[str] if d.multiple else kind  # a repeatable flag: a list in run config
        # the lower bound only: a value above a limit reaches `build_settings`, whose error names
        # the setting and the limit (docs/limits.md)
        lo, _, lo_open = d.bounds
        bounds: dict[str, Any] = {("gt" if lo_open else "ge"): lo} if lo is not None else {}
        out[tail] = (kind | None, Field(None, description=f"{d.field.description} Unset: {after}.", **bounds))
    return out


def _groups() -> list[str]:
    """The nested groups of Dagster run-config settings (`budget`)."""
    names = [d.declared.dagster for d in declared_settings() if d.declared.dagster and "." in d.declared.dagster]
    return list(dict.fromkeys(name.split(".")[0] for name in names))


def _config_model(name: str, base: type[Any], fields: dict[str, Any]) -> type[Any]:
    """A Config (or resource) class of declared fields, to subclass: the subclass is what Dagster
    and mypy see by name."""
    return create_model(name, __base__=base, __module__=__name__, **fields)


class BudgetConfig(_config_model("_BudgetFields", Config, _fields("budget", "no limit"))):  # type: ignore[misc]
    """A spend budget (docs/budgets.md): once the next test could pass it, the run starts no more
    tests and the rest are reported as not run, "budget reached"."""


# One Config class per nested group of declared Dagster settings; a new group needs its class here.
_GROUPS: dict[str, type[Config]] = {"budget": BudgetConfig}
if _groups() != list(_GROUPS):  # pragma: no cover - a declaration names a group without its class
    raise ConfigError(f"Dagster run-config groups {_groups()} need a Config class each in {__name__}")


def _run_setting_fields(unset: str, job: str) -> dict[str, Any]:
    """Every run setting declared with a Dagster name for `job` as a field, nested groups as their
    Config class."""
    fields = _fields("", unset, job)
    for group, model in _GROUPS.items():
        fields[group] = (model | None, Field(None, description=f"{model.__name__}: " + ", ".join(model.model_fields)))
    return fields


def _budget(config: BudgetConfig | None) -> dict[str, Any] | None:
    return config.model_dump(exclude_none=True) or None if config is not None else None


def job_config_fields(job: str) -> type[Config]:
    """A Config class (to subclass) of the run settings declared for Dagster job `job`
    (agent_health.model.settings.Declared: `dagster` name, `jobs`); unset fields come from the
    resource, then the environment, then the configuration file."""
    return _config_model(f"_{job.title()}Fields", Config, _run_setting_fields("the resource's", job))


class EvaluateConfig(job_config_fields("evaluate")):  # type: ignore[misc]
    """Run settings of one evaluation run (the Launchpad's config of an `evaluate__*` step), one
    field per run setting declared with a Dagster name (agent_health.model.settings.Declared).
    Unset fields come from the resource, then the configuration file."""


def _deployment_field(name: str) -> Any:
    """The resource field of deployment setting `name`: its declared default, bounds and
    description (agent_health.config.deployment), and the variable `resource_from_env` reads."""
    d = next(d for d in declared_settings(DeploymentSettings) if d.path == name)
    lo, hi, _ = d.bounds if d.annotation in (int, float) else (None, None, False)
    bounds: dict[str, Any] = {key: value for key, value in (("ge", lo), ("le", hi)) if value is not None}
    field = d.field
    default: dict[str, Any] = (
        {"default_factory": field.default_factory} if field.default_factory else {"default": field.default}
    )
    return Field(**default, **bounds, description=f"{field.description} (${d.declared.env})")


class AgentHealthResource(  # Dagster's idiom: the resource is its own value
    _config_model(  # type: ignore[misc]
        "_ResourceFields",
        ConfigurableResource,
        _run_setting_fields("the environment, then the configuration file", "evaluate"),
    )
):
    """agent-health project settings for the code location; its run settings are those declared
    with a Dagster name (agent_health.model.settings.Declared)."""

    config_path: str | None = _deployment_field("config_path")
    eval_root: str | None = _deployment_field("eval_root")
    state_dir: str | None = _deployment_field("state_dir")
    min_pass_rate: float = _deployment_field("min_pass_rate")
    suite_min_pass_rate: dict[str, float] = _deployment_field("suite_min_pass_rate")
    max_errored_share: float = _deployment_field("max_errored_share")
    baseline: str | None = _deployment_field("baseline")
    missing_evidence: MissingEvidence = _deployment_field("missing_evidence")

    def project(self) -> Project:
        """The project (cached per process; reloaded when the configuration file changes)."""
        return Project.load(self.config_path, self.eval_root, self.state_dir)

    def run_settings(self, run: Config | None = None, more: Mapping[str, Any] | None = None) -> RunSettings:
        """The typed settings of an evaluation run, built by the CLI's builder: the run's config
        (`EvaluateConfig`, `RejudgeConfig`: fields named as `build_settings` takes them; and `more`
        settings, likewise), then this resource, then the environment, then the configuration file,
        then defaults."""
        fields = [name for name in _fields("", "", "evaluate") if name not in _GROUPS]
        overrides: dict[str, Any] = {name: getattr(self, name) for name in fields}
        budget = _budget(self.budget) or {}
        for name in type(run).model_fields if run is not None else ():
            value = getattr(run, name)
            if name in _GROUPS:
                budget.update(_budget(value) or {})  # the run's limits over the resource's, one by one
            elif value is not None:
                overrides[name] = value
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
            missing_evidence=self.missing_evidence,
        )


def resource_from_env() -> AgentHealthResource:
    """The resource as configured by environment variables (`deployment_settings`, docs/deploy.md;
    a bad value is a ConfigError naming the variable). Run settings (AGENT_HEALTH_CONCURRENCY,
    ..._TIMEOUT, ..._EPOCHS, ...) are read by `build_settings` when a run starts, as the CLI reads
    them."""
    s = deployment_settings()
    return AgentHealthResource(
        config_path=s.config_path,
        eval_root=s.eval_root,
        state_dir=s.state_dir,
        min_pass_rate=s.min_pass_rate,
        suite_min_pass_rate=dict(s.suite_min_pass_rate),
        max_errored_share=s.max_errored_share,
        baseline=s.baseline,
        missing_evidence=s.missing_evidence,
    )
