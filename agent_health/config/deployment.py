"""Deployment settings: what a deployment gives only through its environment (where the project is,
the Dagster code location's gates and automation, the OpenSearch connection a trace source or store
falls back to), each declared once, as a field of `DeploymentSettings` with its variable, default,
bounds and description. Run settings (concurrency, timeout, budget, ...) are declared on
RunSettings instead (agent_health.model.settings); docs/deploy.md's table lists these.

`deployment_settings()` reads them all, the one way: a value that does not fit (a number out of
its bounds, JSON that is not an object of rates, a malformed cron expression) is a ConfigError
naming the variable and the value."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from annotated_types import Ge, Le
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent_health.errors import ConfigError
from agent_health.model.limits import check_number
from agent_health.model.settings import DeclaredSetting, declare, declared_settings

Model = TypeVar("Model", bound=BaseModel)
Rate = Annotated[float, Ge(0), Le(1)]
# What a gate does when registered tests have no result: fail, or fail as a warning only
MissingEvidence = Literal["fail", "warn"]
SUITE_RATES_EXAMPLE = '{"rca/payments": 0.8}'


class OpenSearchDefaults(BaseModel):
    """The OpenSearch connection a trace source or result store uses where its settings do not say
    (docs/traces.md)."""

    model_config = ConfigDict(frozen=True)

    url: str = Field(
        "http://localhost:9200",
        description="OpenSearch URL of a trace source or store without `url`.",
        json_schema_extra=declare(env="AGENT_HEALTH_OPENSEARCH_URL"),
    )
    username: str | None = Field(
        None,
        description="Basic-auth user of an OpenSearch trace source or store without `auth` (basic auth then).",
        json_schema_extra=declare(env="AGENT_HEALTH_OPENSEARCH_USERNAME"),
    )
    password: SecretStr | None = Field(
        None,
        description="Its password (or name a variable with `auth.password_env`).",
        json_schema_extra=declare(env="AGENT_HEALTH_OPENSEARCH_PASSWORD"),
    )


class DeploymentSettings(BaseModel):
    """Settings a deployment gives through environment variables, one field each."""

    model_config = ConfigDict(frozen=True)

    config_path: str | None = Field(
        None,
        description="agent_health_config.py (else found from the working directory upwards).",
        json_schema_extra=declare(env="AGENT_HEALTH_CONFIG"),
    )
    eval_root: str | None = Field(
        None,
        description="Eval root, over the configuration's `eval_root`.",
        json_schema_extra=declare(env="AGENT_HEALTH_EVAL_ROOT"),
    )
    state_dir: str | None = Field(
        None,
        description="State folder (results live in <state>/results), over the configuration's.",
        json_schema_extra=declare(env="AGENT_HEALTH_STATE_DIR"),
    )
    min_pass_rate: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Rollup check: pass rate at least this.",
        json_schema_extra=declare(env="AGENT_HEALTH_MIN_PASS_RATE"),
    )
    suite_min_pass_rate: dict[str, float] = Field(
        default_factory=dict,
        description=f"Per-suite pass-rate thresholds, a JSON object of rates like `{SUITE_RATES_EXAMPLE}`.",
        json_schema_extra=declare(env="AGENT_HEALTH_SUITE_MIN_PASS_RATE", parse="json", bounded=Rate),
    )
    max_errored_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Rollup check: errored share at most this.",
        json_schema_extra=declare(env="AGENT_HEALTH_MAX_ERRORED_SHARE"),
    )
    missing_evidence: MissingEvidence = Field(
        "fail",
        description="What a rollup check does when current tests have no stored result (on the version, or on "
        "the baseline `no_regression` compares with): `fail`, or `warn` (it fails as WARN); either way it names how "
        "many and which.",
        json_schema_extra=declare(env="AGENT_HEALTH_MISSING_EVIDENCE"),
    )
    baseline: str | None = Field(
        None,
        description="Baseline agent version of every comparison and regression check (default: the version "
        "registered just before the candidate).",
        json_schema_extra=declare(env="AGENT_HEALTH_BASELINE"),
    )
    sensor_interval_s: int = Field(
        30,
        ge=1,
        le=86_400,
        description="Seconds between evaluations of each sensor.",
        json_schema_extra=declare(env="AGENT_HEALTH_SENSOR_INTERVAL_S"),
    )
    evaluate_missing: bool = Field(
        True,
        description="Automation requests every configured agent version's missing results (a version x test "
        "with no result, not being evaluated), once each; false: only new versions and added or changed tests "
        "are requested, the rest waits for a backfill or the nightly schedule.",
        json_schema_extra=declare(env="AGENT_HEALTH_EVALUATE_MISSING"),
    )
    schedule_cron: str = Field(
        "0 2 * * *",
        description="Cron expression (UTC) of each suite's nightly schedule.",
        json_schema_extra=declare(env="AGENT_HEALTH_SCHEDULE_CRON", parse="cron"),
    )
    # Bounded runs keep what a crashed run leaves to its retry small, let queued runs (and the
    # refresh that follows each) interleave, and keep one run's events in batches a worker can
    # hold; a retry reuses what the dead run stored (docs/deploy.md).
    max_partitions_per_run: int = Field(
        1000,
        ge=0,
        le=1_000_000,
        description="Partitions per evaluation run; larger backfills are split (0: one run of any size).",
        json_schema_extra=declare(env="AGENT_HEALTH_MAX_PARTITIONS_PER_RUN"),
    )
    # A run whose worker died (a killed process, a lost machine) stays STARTED until run monitoring
    # ends it at this limit; the default is sized from the bound above (`sized_run_seconds`).
    max_run_seconds: int | None = Field(
        None,
        ge=1,
        le=30 * 86_400,
        description="Maximum runtime of a run in the dagster.yaml the project writes (unset: sized from the partitions "
        "per run, concurrency, timeout and epochs; docs/deploy.md).",
        json_schema_extra=declare(env="AGENT_HEALTH_MAX_RUN_SECONDS"),
    )
    executor: Literal["in_process", "multiprocess", "celery"] = Field(
        "in_process",
        description="How a run executes its steps: `in_process` (one after the other in the run worker: the least CPU "
        "and time per run, as a run never holds two suites' evaluations), `multiprocess` (processes beside the run "
        "worker, each forked from a server that imported the code location once) or `celery` (tasks on the Celery "
        "workers of the broker below; the `celery` extra).",
        json_schema_extra=declare(env="AGENT_HEALTH_EXECUTOR"),
    )
    celery_broker: SecretStr | None = Field(
        None,
        description="Celery broker URL (`redis://host:6379/0`) of the run workers and the Celery workers alike; "
        "required with the `celery` executor.",
        json_schema_extra=declare(env="AGENT_HEALTH_CELERY_BROKER"),
    )
    celery_backend: SecretStr | None = Field(
        None,
        description="Celery result backend URL (unset: the broker's).",
        json_schema_extra=declare(env="AGENT_HEALTH_CELERY_BACKEND"),
    )
    opensearch: OpenSearchDefaults = Field(
        default_factory=OpenSearchDefaults, description="OpenSearch connection defaults."
    )


# What a run costs beside its tests: the run worker's start, loading the code location, the
# bookkeeping of its partitions; and the slack over the waves of tests a limit must leave (tests whose
# own timeout is longer, stores and Dagster under load).
RUN_START_S = 600
RUN_SLACK = 1.5


def sized_run_seconds(partitions: int, concurrency: int, timeout_s: float, epochs: int = 1) -> int:
    """The maximum runtime of an evaluation run of `partitions` partitions when every test runs to
    its timeout: ceil(partitions x epochs / concurrency) waves of `timeout_s` seconds, times
    RUN_SLACK, plus RUN_START_S. At the defaults (1,000 partitions, concurrency 8, 120 s, 1 epoch):
    23,100 s (6 h 25 min)."""
    waves = math.ceil(max(partitions, 1) * max(epochs, 1) / max(concurrency, 1))
    return math.ceil(waves * timeout_s * RUN_SLACK) + RUN_START_S


def deployment_declarations() -> tuple[DeclaredSetting, ...]:
    """Every declared deployment setting (the `opensearch.` group's too), in field order."""
    return declared_settings(DeploymentSettings)


def deployment_settings(environ: Mapping[str, str] | None = None) -> DeploymentSettings:
    """The deployment settings from the environment (`environ`, else the process's); unset or
    blank variables keep their defaults. Raises ConfigError naming the variable and the value."""
    return read_declared(DeploymentSettings, environ)


def opensearch_defaults(environ: Mapping[str, str] | None = None) -> OpenSearchDefaults:
    """The OpenSearch connection defaults alone (read where a client is built)."""
    return read_declared(OpenSearchDefaults, environ)


def deployment_variable(path: str) -> str:
    """The environment variable of deployment setting `path` (`eval_root`, `opensearch.url`)."""
    for d in deployment_declarations():
        if d.path == path and d.declared.env:
            return d.declared.env
    raise KeyError(path)


def read_declared(model: type[Model], environ: Mapping[str, str] | None = None) -> Model:
    """`model` with each field declared with a variable read from `environ` (nested groups too)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for d in declared_settings(model):
        raw = env.get(str(d.declared.env), "").strip()
        if d.declared.env and raw:
            *groups, name = d.path.split(".")
            into = values
            for group in groups:
                into = into.setdefault(group, {})
            into[name] = _parse(d, raw, f"${d.declared.env}")
    return model.model_validate(values)


def _parse(d: DeclaredSetting, raw: str, where: str) -> Any:
    if d.declared.parse == "cron":
        return check_cron(raw, where)
    if d.declared.parse == "json":
        return _rates(d, raw, where)
    if d.choices is not None:
        if raw.lower() not in d.choices:
            raise ConfigError(f"{where}: expected one of {', '.join(d.choices)}, got {raw!r}")
        return raw.lower()
    if d.annotation is bool:
        return _flag(raw, where)
    if d.annotation in (int, float):
        lo, hi, _ = d.bounds
        return _number(raw, where, lo, hi, d.annotation is int)
    return raw


FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _flag(raw: str, where: str) -> bool:
    value = FLAGS.get(raw.lower())
    if value is None:
        raise ConfigError(f"{where}: expected true or false (or 1/0, yes/no, on/off), got {raw!r}")
    return value


def _number(raw: Any, where: str, lo: float | None, hi: float | None, whole: bool) -> float:
    try:
        number = check_number(raw, where, -1e308 if lo is None else lo, 1e308 if hi is None else hi, whole)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return int(number) if whole else number


def _rates(d: DeclaredSetting, raw: str, where: str) -> dict[str, float]:
    """A JSON object of numbers within the declaration's bounds (per suite)."""
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{where}: expected a JSON object like {SUITE_RATES_EXAMPLE}, got {raw!r}")
    lo, hi, _ = d.bounds
    return {str(k): _number(v, f"{where}[{k!r}]", lo, hi, False) for k, v in parsed.items()}


_CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
# minute, hour, day of month, month, day of week: their ranges and the names the last two take
_CRON_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_CRON_NAMES = {
    3: "jan feb mar apr may jun jul aug sep oct nov dec".split(),
    4: "sun mon tue wed thu fri sat".split(),
}
_CRON_PART = re.compile(r"^(\*|\w+(?:-\w+)?)(?:/(\d+))?$")


def check_cron(text: str, where: str = "cron") -> str:
    """`text` when it is a five-field cron expression (numbers in each field's range, `*`, ranges,
    lists, steps, month and weekday names) or a macro such as @daily; else a ConfigError naming
    `where` and the value. A cheap check, so a typo fails when the definitions load rather than
    when Dagster first evaluates the schedule."""
    fields = text.split()
    if len(fields) == 1 and fields[0].lower() in _CRON_MACROS:
        return text
    if len(fields) == 5 and all(_cron_field(f, i) for i, f in enumerate(fields)):
        return text
    raise ConfigError(f"{where}: expected a cron expression of five fields like '0 2 * * *' (or @daily), got {text!r}")


def _cron_field(field: str, i: int) -> bool:
    lo, hi = _CRON_FIELDS[i]
    names = _CRON_NAMES.get(i, [])
    for part in field.split(","):
        match = _CRON_PART.match(part)
        if match is None or match.group(2) == "0":
            return False
        if match.group(1) == "*":
            continue
        for token in match.group(1).split("-"):
            if token.isdigit():
                if not lo <= int(token) <= hi:
                    return False
            elif token.lower() not in names:
                return False
    return True
