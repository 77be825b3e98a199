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

from pydantic import BaseModel, ValidationError, create_model

from agent_health.config import Config
from agent_health.errors import ConfigError
from agent_health.model import BudgetSettings, JudgeRunSettings, RunSettings, StoreSettings, check_replay_mode
from agent_health.model.limits import PLANNED_WORK_MAX
from agent_health.model.settings import DeclaredSetting, check_store_settings, declared_settings, flag_name

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


def _text(raw: str, name: str) -> str:
    return raw.strip()


# How a declared setting's text (an environment variable's) is read: `Declared.parse`, else the
# field's type. Each names the variable in its message.
PARSERS: dict[str, Callable[[str, str], Any]] = {
    "bool": _bool,
    "int": _int,
    "seconds": _float,
    "usd": _usd,
    "text": _text,
    "replay": lambda raw, name: check_replay_mode(raw, name),
    "store": parse_store,
}


def parser_for(setting: DeclaredSetting) -> Callable[[str, str], Any]:
    """How the text of `setting` is read: its declared parser, else by its type."""
    kind = setting.declared.parse or {bool: "bool", int: "int", float: "seconds"}.get(setting.annotation, "text")
    parse = PARSERS[kind]
    if setting.declared.negate:
        return lambda raw, name: not parse(raw, name)
    return parse


def env_vars() -> dict[str, tuple[str, Callable[[str, str], Any]]]:
    """Variable -> (setting, parser), from the declarations (`judge.*`, `budget.*` are nested)."""
    return {d.declared.env: (d.path, parser_for(d)) for d in declared_settings() if d.declared.env}


def _aliases() -> dict[str, tuple[str, bool]]:
    """Names `overrides` may use -> (setting, whether the value is negated): each declared
    setting's flag name (`timeout`, `no_cache`), its Dagster name (`skip_judge`) and its `names`."""
    out: dict[str, tuple[str, bool]] = {}
    for d in declared_settings():
        if d.declared.flag:
            out[flag_name(d.declared.flag)] = (d.path, d.declared.negate)
        if d.declared.off_flag:
            out[flag_name(d.declared.off_flag)] = (d.path, False)
        if d.declared.dagster and "." not in d.declared.dagster:
            out[d.declared.dagster] = (d.path, False)
        out.update({name: (d.path, False) for name in d.declared.names})
    return {k: v for k, v in out.items() if k != v[0]}


ENV_VARS = env_vars()
_ALIASES = _aliases()
_NESTED: dict[str, type[BaseModel]] = {
    "judge": JudgeRunSettings,
    "budget": BudgetSettings,
}  # settings given as a mapping of their own
_FIELDS = set(RunSettings.model_fields) - set(_NESTED)
_FIELDS |= {f"{group}.{k}" for group, model in _NESTED.items() for k in model.model_fields}
_OFF_FLAGS = {flag_name(d.declared.off_flag) for d in declared_settings() if d.declared.off_flag}


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
        name, negated = _ALIASES.get(key, (key, False))
        if name not in _FIELDS:
            raise ConfigError(f"unknown run setting {key!r}; known: {', '.join(sorted(_FIELDS | set(_ALIASES)))}")
        if negated:
            value = not value
        elif key in _OFF_FLAGS:
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
    out: dict[str, tuple[Any, str]] = {}
    for d in declared_settings():
        if not d.declared.config:
            continue
        *groups, key = d.declared.config.split(".")
        owner: Any = config
        for group in groups:
            owner = getattr(owner, group)
        # a budget limit counts where the configuration sets it: an unset one is no limit
        if groups[:1] == ["budget"] and key not in owner.model_fields_set:
            continue
        out[d.path] = (getattr(owner, key), f"configuration {d.declared.config}")
    return out


def stored_in(config: Config, environ: Mapping[str, str] | None = None) -> tuple[StoreSettings | None, str]:
    """The store a run writes to when no flag names one, by `build_settings`' rule (the store's
    variable, else the configuration's `store`), and where that came from. The commands that read
    what runs stored (`report`, `compare`, `serve`, `calibrate`) read this store, so they find what
    `run` stored under the same environment. None: storing is off."""
    environ = os.environ if environ is None else environ
    for var, (name, parse) in ENV_VARS.items():
        if name == "store" and environ.get(var, "").strip():
            return parse(environ[var], f"${var}"), f"${var}"
    return config.store, "configuration store"


def build_settings(
    config: Config,
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> RunSettings:
    """The run's settings: `overrides` (flags or run config; None values mean "not given"), then
    the environment, then the configuration, then the defaults. Keys of `overrides` are RunSettings
    field names (`judge` and `budget` as nested mappings, or dotted: `judge.model`) or a name its
    declaration gives (`Declared`): its flag's (`timeout`, `no_cache`, `no_store`, `max_cost`,
    `budget_exit`), its Dagster name (`skip_judge`, `judge_model`) or one of its `names`; `store`
    takes a type name, `none`, a JSON object or StoreSettings."""
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
        values["agents"] = tuple(dict.fromkeys(config.agent_ref(str(ref)) for ref in values["agents"]))
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


# The bounds (docs/limits.md) of the run settings a user gives; RunSettings itself stays unbounded
# so that run manifests stored before a bound existed still load.
_BOUNDS: dict[str, Any] = {
    d.path: (d.declared.bounded, d.field.default) for d in declared_settings() if d.declared.bounded is not None
}
_Bounded: type[BaseModel] = create_model("_Bounded", **_BOUNDS)


def check_planned_work(plan: Mapping[str, Sequence[LoadedTest]], settings: RunSettings) -> int:
    """The run's trials (each test's epochs, or the run's, for every agent version); a ConfigError
    when they exceed `PLANNED_WORK_MAX` and the run does not say `allow_large_run` (CLI
    `--allow-large-run`, `$AGENT_HEALTH_ALLOW_LARGE_RUN`, or `allow_large_run` in the overrides)."""
    trials = sum(t.epochs or settings.epochs for tests in plan.values() for t in tests)
    if trials > PLANNED_WORK_MAX and not settings.allow_large_run:
        tests = max((len(ts) for ts in plan.values()), default=0)
        raise ConfigError(
            f"this run plans {trials:,} trials ({tests:,} test(s) x epochs x {len(plan)} agent version(s)), "
            f"above the limit of {PLANNED_WORK_MAX:,} (docs/limits.md); pass --allow-large-run "
            "(or AGENT_HEALTH_ALLOW_LARGE_RUN=1) to run it anyway"
        )
    return trials
