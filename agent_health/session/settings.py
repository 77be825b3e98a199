"""The one builder of `RunSettings`, with one precedence rule for every transport.

For each setting, the first of these that gives a value wins:

1. explicit values: CLI flags, Dagster run config, or what a caller passes (`overrides`);
2. environment variables (`ENV_VARS`);
3. the configuration file (`agent_health_config.py`);
4. built-in defaults.

A test's own `timeout=` and `epochs=` win over all of them (the engine applies the run's value
only to tests that do not say). Bad values raise `ConfigError` naming the flag, variable or
setting they came from. docs/running.md is the user-facing version of this.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from agent_health.config import Config
from agent_health.errors import ConfigError
from agent_health.model import BudgetSettings, JudgeRunSettings, RunSettings, StoreSettings, check_replay_mode
from agent_health.model.limits import PLANNED_WORK_MAX, Concurrency, Epochs, Timeout
from agent_health.model.settings import check_store_settings

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.loader.types import LoadedTest
from agent_health.model.validation import describe_errors

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
NO_STORE = ("none", "off")  # AGENT_HEALTH_STORE / store= values that turn storing off


def _bool(raw: str, name: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(_TRUE + _FALSE)}")


def _int(raw: str, name: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a whole number") from None


def _float(raw: str, name: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number of seconds") from None


def _usd(raw: str, name: str) -> float:
    try:
        return float(raw.strip().removeprefix("$"))
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected an amount in USD") from None


def parse_store(value: Any, name: str) -> StoreSettings | None:
    """A store given as a type name (`local`), `none`, a JSON object `{"type": ..., "settings":
    {...}}` (text or mapping), or StoreSettings; None means storing is off."""
    if isinstance(value, StoreSettings) or value is None:
        return value
    if value is False:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in NO_STORE:
            return None
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ConfigError(f"{name}: not a JSON object: {exc}") from None
        else:
            value = {"type": text}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a store type name or an object with type and settings")
    try:
        store = StoreSettings.model_validate(dict(value))
    except ValidationError as exc:
        raise ConfigError(f"{name}: {describe_errors(exc)}") from None
    return check_store_settings(store, f"{name}.settings")


# Variable -> (setting, parser). The setting names are RunSettings fields; `judge.*` are nested.
ENV_VARS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "AGENT_HEALTH_CONCURRENCY": ("concurrency", _int),
    "AGENT_HEALTH_TIMEOUT": ("timeout_s", _float),
    "AGENT_HEALTH_EPOCHS": ("epochs", _int),
    "AGENT_HEALTH_FAIL_FAST": ("fail_fast", _bool),
    "AGENT_HEALTH_SKIP_JUDGE": ("judge.skip", _bool),
    "AGENT_HEALTH_JUDGE_MODEL": ("judge.model", lambda raw, name: raw.strip()),
    "AGENT_HEALTH_NO_CACHE": ("judge.cache", lambda raw, name: not _bool(raw, name)),
    "AGENT_HEALTH_REPLAY": ("replay", lambda raw, name: check_replay_mode(raw, name)),
    "AGENT_HEALTH_STORE": ("store", parse_store),
    "AGENT_HEALTH_ALLOW_LARGE_RUN": ("allow_large_run", _bool),
    "AGENT_HEALTH_MAX_COST": ("budget.max_cost_usd", _usd),
    "AGENT_HEALTH_MAX_JUDGE_COST": ("budget.max_judge_cost_usd", _usd),
    "AGENT_HEALTH_MAX_TOKENS": ("budget.max_tokens", _int),
    "AGENT_HEALTH_BUDGET_EXIT": ("budget.exit_code", _int),
}

# Names callers may use in `overrides` for nested or negated settings (CLI flags, run config).
_ALIASES = {
    "max_cost": "budget.max_cost_usd",
    "max_cost_usd": "budget.max_cost_usd",
    "max_judge_cost": "budget.max_judge_cost_usd",
    "max_judge_cost_usd": "budget.max_judge_cost_usd",
    "max_tokens": "budget.max_tokens",
    "budget_exit": "budget.exit_code",
    "timeout": "timeout_s",
    "skip_judge": "judge.skip",
    "judge_model": "judge.model",
    "no_cache": "judge.cache",
    "cache": "judge.cache",
    "no_store": "store",
    "require_calibrated": "judge.require_calibrated",
}
_NESTED: dict[str, type[BaseModel]] = {
    "judge": JudgeRunSettings,
    "budget": BudgetSettings,
}  # settings given as a mapping of their own
_FIELDS = set(RunSettings.model_fields) - set(_NESTED)
_FIELDS |= {f"{group}.{k}" for group, model in _NESTED.items() for k in model.model_fields}


def _explicit(overrides: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    for key, value in overrides.items():
        if key in _NESTED and isinstance(value, Mapping):
            for k, v in value.items():
                if v is None:
                    continue
                if key == "budget" and f"{key}.{k}" not in _FIELDS:  # a typo would silently lift the budget
                    known = ", ".join(sorted(_NESTED[key].model_fields))
                    raise ConfigError(f"unknown run setting {key}.{k!r}; known: {known}")
                out[f"{key}.{k}"] = (v, f"{key}.{k}")
            continue
        if value is None:  # not given (a CLI flag left out)
            continue
        name = _ALIASES.get(key, key)
        if name not in _FIELDS:
            raise ConfigError(f"unknown run setting {key!r}; known: {', '.join(sorted(_FIELDS | set(_ALIASES)))}")
        if key == "no_cache":
            value = not value
        elif key == "no_store":
            if not value:
                continue
            value = None
        elif name == "store":
            value = parse_store(value, key)
        elif name == "replay":
            value = check_replay_mode(str(value), key)
        out[name] = (value, key)
    return out


def _from_env(environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    for var, (name, parse) in ENV_VARS.items():
        raw = environ.get(var)
        if raw is not None and raw.strip() != "":
            out[name] = (parse(raw, f"${var}"), f"${var}")
    return out


def _from_config(config: Config) -> dict[str, tuple[Any, str]]:
    return {
        "concurrency": (config.concurrency, "configuration concurrency"),
        "timeout_s": (config.timeout_s, "configuration timeout_s"),
        "epochs": (config.epochs, "configuration epochs"),
        "replay": (config.replay, "configuration replay"),
        "store": (config.store, "configuration store"),
        "judge.cache": (config.judge.cache, "configuration judge.cache"),
        **{
            f"budget.{k}": (getattr(config.budget, k), f"configuration budget.{k}")
            for k in config.budget.model_fields_set
        },
    }


def build_settings(
    config: Config,
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> RunSettings:
    """The run's settings: `overrides` (flags or run config; None values mean "not given"), then
    the environment, then the configuration, then the defaults. Keys of `overrides` are RunSettings
    field names (`judge` and `budget` as nested mappings) or the aliases `timeout`, `skip_judge`,
    `judge_model`, `no_cache`, `no_store`, `max_cost`, `max_judge_cost`, `max_tokens`, `budget_exit`;
    `store` takes a type name, `none`, a JSON object or StoreSettings."""
    layers = [_explicit(overrides or {}), _from_env(os.environ if environ is None else environ), _from_config(config)]
    chosen: dict[str, tuple[Any, str]] = {}
    for layer in reversed(layers):  # later (higher) layers overwrite
        chosen.update(layer)
    values: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {group: {} for group in _NESTED}
    for name, (value, _) in chosen.items():
        group, dot, key = name.partition(".")
        if dot and group in nested:
            nested[group][key] = value
        else:
            values[name] = value
    for key in ("agents", "labels", "only"):
        if isinstance(values.get(key), str):
            values[key] = (values[key],)
    if isinstance(values.get("only"), (list, tuple)):  # a union: naming a rule twice changes nothing
        values["only"] = tuple(dict.fromkeys(values["only"]))
    if values.get("agents"):  # KEY alone is the agent's default version; each version runs once
        values["agents"] = tuple(dict.fromkeys(config.agent(str(ref)).ref for ref in values["agents"]))
    try:
        _Bounded.model_validate({k: values[k] for k in _Bounded.model_fields if k in values})
        settings = RunSettings(**values, **nested)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        field = ".".join(loc[:2]) if loc[:1] and loc[0] in _NESTED else (loc[0] if loc else "")
        source = chosen.get(field, (None, field))[1]
        message = str(err.get("msg", exc)).removeprefix("Value error, ")
        raise ConfigError(f"{source}: {message} (got {err.get('input')!r})") from None
    if settings.judge.model:
        try:
            config.judge.check_model(settings.judge.model, chosen["judge.model"][1])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return settings


class _Bounded(BaseModel):
    """The bounds (docs/limits.md) of the run settings a user gives; RunSettings itself stays
    unbounded so that run manifests stored before a bound existed still load."""

    concurrency: Concurrency = 8
    timeout_s: Timeout = 120.0
    epochs: Epochs = 1


def check_planned_work(plan: Mapping[str, Sequence[LoadedTest]], settings: RunSettings) -> int:
    """The run's trials (each test's epochs, or the run's, for every agent version); a ConfigError
    when they exceed `PLANNED_WORK_MAX` and the run does not say `allow_large_run` (CLI
    `--allow-large-run`, `$AGENT_HEALTH_ALLOW_LARGE_RUN`, or `allow_large_run` in the overrides)."""
    trials = sum(t.case.epochs or settings.epochs for tests in plan.values() for t in tests)
    if trials > PLANNED_WORK_MAX and not settings.allow_large_run:
        tests = max((len(ts) for ts in plan.values()), default=0)
        raise ConfigError(
            f"this run plans {trials:,} trials ({tests:,} test(s) x epochs x {len(plan)} agent version(s)), "
            f"above the limit of {PLANNED_WORK_MAX:,} (docs/limits.md); pass --allow-large-run "
            "(or AGENT_HEALTH_ALLOW_LARGE_RUN=1) to run it anyway"
        )
    return trials
