"""How a run executes: the one typed settings object every transport builds.

The CLI builds it from flags, the environment and the configuration, the Dagster resource from
run config, tests directly; `agent_health.session.settings` holds the builder and writes down
the precedence rule (see docs/running.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

from agent_health.errors import ConfigError
from agent_health.model.limits import (
    PLANNED_WORK_MAX,
    BudgetTokens,
    Concurrency,
    CostUSD,
    Epochs,
    Timeout,
    check_setting_numbers,
)
from agent_health.model.validation import check_known_keys
from agent_health.registry import registry

ReplayMode = Literal["off", "record", "auto", "strict"]
REPLAY_MODES: tuple[str, ...] = ("off", "record", "auto", "strict")
StoreType = str  # a kind of the store registry (agent_health/stores/registry.py), checked where configured
OnlyRule = Literal["missing", "failed", "changed"]
ONLY_RULES: tuple[str, ...] = ("missing", "failed", "changed")


def check_replay_mode(mode: str, setting: str = "replay") -> str:
    """The normalised replay mode, or a ConfigError naming the setting."""
    mode = (mode or "off").strip().lower()
    if mode not in REPLAY_MODES:
        raise ConfigError(f"{setting}: unknown replay mode {mode!r}; use one of {', '.join(REPLAY_MODES)}")
    return mode


_OPENSEARCH_CLIENT = {"url", "auth", "timeout_s", "http_compress", "verify_certs", "ca_certs", "client_cert"}
_OPENSEARCH_CLIENT |= {"client_key", "ssl_assert_hostname", "ssl_show_warn", "max_retries", "retry_on_timeout"}
_OPENSEARCH_CLIENT |= {"retry_on_status"}
_S3 = {"bucket", "prefix", "endpoint_url", "region", "profile", "max_attempts", "retry_mode", "timeout_s"}
_S3 |= {"max_pool_connections", "read_concurrency", "log_skew_s", "log_lease_s", "log_compact_at"}
# The settings each store type reads (docs/deploy.md); any other key is a typo, named at load time.
STORE_SETTING_KEYS: dict[str, frozenset[str]] = {
    "local": frozenset({"path"}),
    "s3": frozenset({*_S3, "shared"}),
    "opensearch": frozenset({*_OPENSEARCH_CLIENT, "index", "page_size", "mget_size", "shared"}),
}


class StoreSettings(BaseModel):
    """Where results are stored. Credentials never go here: they come from the environment."""

    model_config = ConfigDict(frozen=True)

    type: StoreType = Field(
        "local",
        description="local (files under the state folder), s3, opensearch, or a kind an installed package "
        "registers (entry point group agent_health.stores; docs/extending.md).",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Store settings. local: path. s3: bucket, prefix, endpoint_url, region. "
            "opensearch: url, index, auth, TLS options."
        ),
    )


# Names of settings that would hold a credential (`*_env` names a variable instead: fine).
SECRET_SETTING_WORDS = (
    "password",
    "secret",
    "token",
    "api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
)


def names_a_secret(key: object) -> bool:
    name = str(key).lower()
    return not name.endswith("_env") and any(word in name for word in SECRET_SETTING_WORDS)


def _holds_secret(key: object, value: object) -> bool:
    if names_a_secret(key):
        return True
    if isinstance(value, Mapping):
        return any(_holds_secret(k, v) for k, v in value.items())
    return isinstance(value, str) and "://" in value and "@" in value  # a URL with userinfo


def check_store_settings(store: StoreSettings | None, where: str = "store.settings") -> StoreSettings | None:
    """`store` when its type is a registered kind and its settings are ones that type reads, with
    numbers inside their bounds; else a ConfigError naming the setting and the closest known name.
    Checked where a store is configured (the configuration, `--store`, `$AGENT_HEALTH_STORE`), not
    when a stored run manifest is read. An inline credential is left to the backend's check, which
    names it as a secret; an installed package's store checks its own settings' names."""
    if store is None:
        return None
    try:
        registry("agent_health.stores").check(store.type, where.removesuffix(".settings") + ".type")
        given = [k for k, v in store.settings.items() if not _holds_secret(k, v)]
        if store.type in STORE_SETTING_KEYS:
            check_known_keys(given, STORE_SETTING_KEYS[store.type], f"{where} ({store.type} store)")
        check_setting_numbers(store.settings, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return store


@dataclass(frozen=True)
class Declared:
    """Where a user can give one run setting. It sits on the RunSettings field (as the field's
    `json_schema_extra`, a callable that leaves the JSON schema alone), and every surface is derived
    from it: the CLI options of `run` and `rejudge`, the environment variables and configuration
    lookups of `build_settings`, and Dagster's `EvaluateConfig`, `RejudgeConfig` and resource fields
    (`declared_settings()`; docs/running.md)."""

    flag: str | None = None  # the CLI flag, `--concurrency`; None: no flag
    short: str | None = None  # its short form, `-c`
    env: str | None = None  # the environment variable, AGENT_HEALTH_CONCURRENCY
    config: str | None = None  # the Config attribute (dotted: `judge.cache`) that gives a project's value
    dagster: str | None = None  # the name in Dagster's run config and resource (dotted: a nested group)
    commands: tuple[str, ...] = ("run",)  # the CLI commands that take the flag
    # the Dagster jobs whose run config takes the `dagster` name: `evaluate` (EvaluateConfig and the
    # resource's defaults), `rejudge` (RejudgeConfig)
    jobs: tuple[str, ...] = ("evaluate",)
    negate: bool = False  # the flag and the variable turn the setting off (--no-cache)
    off_flag: str | None = None  # a flag that sets the setting to None (--no-store)
    off_help: str | None = None  # the CLI help of `off_flag`
    parse: str | None = None  # how text is read (session/settings.py PARSERS); None: from the type
    bounded: Any = None  # the bounded type a user's value must fit (docs/limits.md), if not the field's
    metavar: str | None = None
    help: str | None = None  # the CLI help, else the field's description
    names: tuple[str, ...] = ()  # more names `build_settings` overrides accept for it (older callers)

    def __call__(self, schema: dict[str, Any]) -> None:
        """pydantic's json_schema_extra hook: the declaration is not part of the schema."""


@dataclass(frozen=True)
class DeclaredSetting:
    """One declared run setting: its RunSettings path (`judge.model`), field and declaration."""

    path: str
    field: FieldInfo
    declared: Declared

    @property
    def _typed(self) -> Any:
        """The field's type without `| None` (Annotated with its bounds, if it has them)."""
        ann = self.field.annotation
        if get_origin(ann) in (Union, type(int | None)):
            args = [a for a in get_args(ann) if a is not type(None)]
            ann = args[0] if len(args) == 1 else ann
        return ann

    @property
    def annotation(self) -> Any:
        """The field's type without `| None` and bounds: `int`, `tuple[str, ...]`, a Literal."""
        ann = self._typed
        return get_args(ann)[0] if get_origin(ann) is Annotated else ann

    @property
    def multiple(self) -> bool:
        """A tuple setting: the flag repeats."""
        return get_origin(self.annotation) is tuple

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The values a Literal setting (or a tuple of them) takes."""
        ann = get_args(self.annotation)[0] if self.multiple else self.annotation
        return tuple(str(a) for a in get_args(ann)) if get_origin(ann) is Literal else None

    @property
    def bounds(self) -> tuple[float | None, float | None, bool]:
        """(lowest, highest, whether the lowest is excluded) of a number the user gives."""
        lo: float | None = None
        hi: float | None = None
        lo_open = False
        source = self.declared.bounded if self.declared.bounded is not None else self.field
        metadata = list(getattr(source, "metadata", ()))
        for arg in get_args(source) or get_args(self._typed):
            metadata += getattr(arg, "metadata", [arg])
        for m in metadata:
            if isinstance(m, Ge):
                lo = m.ge  # type: ignore[assignment]
            elif isinstance(m, Gt):
                lo, lo_open = m.gt, True  # type: ignore[assignment]
            elif isinstance(m, Le):
                hi = m.le  # type: ignore[assignment]
        return lo, hi, lo_open

    @property
    def help(self) -> str:
        return self.declared.help or self.field.description or self.path


def flag_name(flag: str) -> str:
    """The Python name of a flag: `--max-cost` -> `max_cost`."""
    return flag.lstrip("-").replace("-", "_")


def declare(**where: Any) -> Declared:
    """The declaration of a run setting's flag, variable, configuration key and Dagster name (see
    `Declared`), for a field's `json_schema_extra`."""
    return Declared(**where)


def declared_settings(model: type[BaseModel] | None = None, prefix: str = "") -> tuple[DeclaredSetting, ...]:
    """Every declared run setting of RunSettings (nested groups' too), in field order."""
    return tuple(_walk(model or RunSettings, prefix))


def _walk(model: type[BaseModel], prefix: str) -> Iterator[DeclaredSetting]:
    for name, field in model.model_fields.items():
        if isinstance(field.json_schema_extra, Declared):
            yield DeclaredSetting(prefix + name, field, field.json_schema_extra)
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _walk(field.annotation, f"{prefix}{name}.")


class JudgeRunSettings(BaseModel):
    """The judge part of a run: skip mode, model override and cache."""

    model_config = ConfigDict(frozen=True)

    skip: bool = Field(
        False,
        description="Skip every judge() call (neutral, skipped verdicts).",
        json_schema_extra=declare(
            flag="--no-judge",
            env="AGENT_HEALTH_SKIP_JUDGE",
            dagster="skip_judge",
            help="Skip every judge() (neutral verdicts).",
        ),
    )
    model: str | None = Field(
        None,
        description="Judge model for this run (`provider:model`), over judge.model.",
        json_schema_extra=declare(
            flag="--judge-model",
            env="AGENT_HEALTH_JUDGE_MODEL",
            dagster="judge_model",
            commands=("run", "rejudge"),
            jobs=("evaluate", "rejudge"),
            metavar="[PROVIDER:]MODEL",
            help="Judge model for this run, over judge.model.",
        ),
    )
    cache: bool = Field(
        True,
        description="Read and write the persistent judge cache.",
        # rejudge has its own --cache/--no-cache: it asks the judges again unless told (cli/rejudge.py)
        json_schema_extra=declare(
            flag="--no-cache",
            negate=True,
            env="AGENT_HEALTH_NO_CACHE",
            config="judge.cache",
            names=("cache",),
            help="Bypass the judge cache (neither read nor write).",
        ),
    )
    require_calibrated: bool = Field(
        False,
        description="A gating judge that misses judge.calibration errors its verdicts and the run exits 2, "
        "instead of observing.",
        json_schema_extra=declare(
            flag="--require-calibrated",
            env="AGENT_HEALTH_REQUIRE_CALIBRATED",
            dagster="require_calibrated",
            help="A gating judge that misses judge.calibration errors its verdicts and the run exits 2 "
            "(default: it only observes, with a warning).",
        ),
    )


class BudgetSettings(BaseModel):
    """A run's spend budget (docs/budgets.md): once starting the next test could pass it, the run
    starts no more tests and reports the rest as not run, "budget reached". Each limit is off
    when None; costs come from the price table (`prices` and the bundled price database)."""

    model_config = ConfigDict(frozen=True)

    max_cost_usd: CostUSD | None = Field(
        None,
        description="Agent and judge spend together, in USD.",
        json_schema_extra=declare(
            flag="--max-cost",
            env="AGENT_HEALTH_MAX_COST",
            config="budget.max_cost_usd",
            dagster="budget.max_cost_usd",
            commands=("run", "rejudge"),
            jobs=("evaluate", "rejudge"),
            parse="usd",
            metavar="USD",
            names=("max_cost_usd",),
            help="Budget of agent + judge spend: once the next test could pass it, no more tests start "
            "(the rest are reported not run, 'budget reached').",
        ),
    )
    max_judge_cost_usd: CostUSD | None = Field(
        None,
        description="Judge spend alone, in USD.",
        json_schema_extra=declare(
            flag="--max-judge-cost",
            env="AGENT_HEALTH_MAX_JUDGE_COST",
            config="budget.max_judge_cost_usd",
            dagster="budget.max_judge_cost_usd",
            commands=("run", "rejudge"),
            jobs=("evaluate", "rejudge"),
            parse="usd",
            metavar="USD",
            names=("max_judge_cost_usd",),
            help="Budget of judge spend alone.",
        ),
    )
    max_tokens: BudgetTokens | None = Field(
        None,
        description="Agent and judge tokens together.",
        json_schema_extra=declare(
            flag="--max-tokens",
            env="AGENT_HEALTH_MAX_TOKENS",
            config="budget.max_tokens",
            dagster="budget.max_tokens",
            commands=("run", "rejudge"),
            jobs=("evaluate", "rejudge"),
            help="Budget of agent + judge tokens.",
        ),
    )
    exit_code: Literal[0, 1] = Field(
        1,
        description="Exit code of a run the budget stopped when nothing else failed (--budget-exit).",
        json_schema_extra=declare(
            flag="--budget-exit",
            env="AGENT_HEALTH_BUDGET_EXIT",
            config="budget.exit_code",
            commands=("run", "rejudge"),
            parse="int",
            help="Exit code of a run the budget stopped when nothing else failed (default 1).",
        ),
    )

    @property
    def active(self) -> bool:
        """True when any limit is set."""
        return any(v is not None for v in (self.max_cost_usd, self.max_judge_cost_usd, self.max_tokens))

    @property
    def counts_cost(self) -> bool:
        """True when a limit is in USD (every model then needs a price)."""
        return self.max_cost_usd is not None or self.max_judge_cost_usd is not None


class Shard(BaseModel):
    """One of `count` disjoint parts of a run's selected tests (`--shard INDEX/COUNT`): the tests
    sorted by id, every `count`-th from the `index`-th, so the shards of one selection are balanced,
    disjoint, cover every test, and do not depend on the order files were found in."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=1, description="Which part, from 1.")
    count: int = Field(ge=1, description="How many parts the tests are split into.")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        """`"2/4"` (the flag's form) as {index: 2, count: 4}."""
        if isinstance(data, str):
            index, sep, count = data.partition("/")
            if not sep or not index.strip().isdigit() or not count.strip().isdigit():
                raise ValueError("expected INDEX/COUNT, e.g. 1/4")
            return {"index": int(index), "count": int(count)}
        return data

    @model_validator(mode="after")
    def _index_in_range(self) -> Shard:
        if self.index > self.count:
            raise ValueError(f"INDEX must be at most COUNT (shard {self.index} of {self.count})")
        return self

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class RunSettings(BaseModel):
    """Everything that decides how a run executes, apart from which tests it runs.

    A test's own `timeout=` and `epochs=` win over `timeout_s` and `epochs` here (as a pytest
    marker wins over the command line): these are the defaults for tests that do not say.
    """

    model_config = ConfigDict(frozen=True)

    agents: tuple[str, ...] = Field(
        (),
        description="Agent versions to run, as KEY@VERSION; empty: the default agent.",
        json_schema_extra=declare(
            flag="--agent",
            metavar="KEY@VERSION",
            help="Agent version to run (repeatable; all share one concurrency limit). Default: the config's.",
        ),
    )
    # Bounded where a run's settings are built (`build_settings`, docs/limits.md), not here: a
    # stored run manifest written before a bound existed must still load.
    concurrency: int = Field(
        8,
        ge=1,
        description="Tests in flight at once, over all agent versions of the run.",
        json_schema_extra=declare(
            flag="--concurrency",
            short="-c",
            env="AGENT_HEALTH_CONCURRENCY",
            config="concurrency",
            dagster="concurrency",
            commands=("run", "rejudge"),
            bounded=Concurrency,
            help="Tests in flight at once, over all agent versions.",
        ),
    )
    timeout_s: float = Field(
        120.0,
        gt=0,
        description="Per-test timeout in seconds, for tests without their own.",
        json_schema_extra=declare(
            flag="--timeout",
            env="AGENT_HEALTH_TIMEOUT",
            config="timeout_s",
            dagster="timeout_s",
            commands=("run", "rejudge"),
            parse="seconds",
            bounded=Timeout,
            help="Per-test timeout in seconds.",
        ),
    )
    epochs: int = Field(
        1,
        ge=1,
        description="Independent trials per test, for tests without their own.",
        json_schema_extra=declare(
            flag="--epochs",
            env="AGENT_HEALTH_EPOCHS",
            config="epochs",
            dagster="epochs",
            bounded=Epochs,
            help="Independent trials per test (pass@k, pass^k).",
        ),
    )
    fail_fast: bool = Field(
        False,
        description="Stop starting tests after the first failure or error.",
        json_schema_extra=declare(flag="--fail-fast", env="AGENT_HEALTH_FAIL_FAST"),
    )
    judge: JudgeRunSettings = Field(default_factory=JudgeRunSettings, description="Judge skip, model and cache.")
    replay: ReplayMode = Field(
        "off",
        description="Record/replay of agent runs: off, record, auto or strict.",
        json_schema_extra=declare(
            flag="--replay",
            env="AGENT_HEALTH_REPLAY",
            config="replay",
            dagster="replay",
            parse="replay",
            help="Record agent runs, replay recordings (auto: replay when recorded, else record; strict: a "
            "missing recording is an error). Default: the config's, off.",
        ),
    )
    labels: tuple[str, ...] = Field(
        (),
        description="Only tests carrying every one of these labels.",
        json_schema_extra=declare(
            flag="--label",
            commands=("run", "rejudge"),
            dagster="labels",  # Dagster's evaluate jobs select tests by partition instead
            jobs=("rejudge",),
            help="Only tests with this label (repeatable: all must match).",
        ),
    )
    grep: str | None = Field(
        None,
        description="Only tests whose name or id matches this regular expression.",
        json_schema_extra=declare(flag="--grep", commands=("run", "rejudge"), dagster="grep", jobs=("rejudge",)),
    )
    shard: Shard | None = Field(
        None,
        description="Run only this shard of the tests selected by labels and grep (--shard INDEX/COUNT).",
        json_schema_extra=declare(
            flag="--shard",
            metavar="INDEX/COUNT",
            help="Run one of COUNT disjoint parts of the selected tests (CI jobs in parallel; `agent-health merge` "
            "joins their JSON reports).",
        ),
    )
    only: tuple[OnlyRule, ...] = Field(
        (),
        description=(
            "Only tests that need a run, by the stored results (a union): missing (no stored result for the "
            "agent version), failed (the stored result did not pass), changed (the test's definition, the agent "
            "version's settings or the judge settings changed since). Empty: every selected test."
        ),
        json_schema_extra=declare(
            flag="--only",
            help="Only tests the store says need a run (repeatable, a union): missing (no stored result), failed "
            "(stored result did not pass), changed (test, agent or judge settings changed since). Needs a store.",
        ),
    )
    store: StoreSettings | None = Field(
        default_factory=StoreSettings,
        description="Where each result is stored as it finishes; None: not stored.",
        json_schema_extra=declare(
            flag="--store",
            off_flag="--no-store",
            off_help="Do not store the results (reporters only).",
            env="AGENT_HEALTH_STORE",
            config="store",
            parse="store",
            metavar="TYPE|JSON",
            help='Result store: a type (local, s3, opensearch) or {"type": ..., "settings": {...}}. '
            "Default: the config's.",
        ),
    )
    allow_large_run: bool = Field(
        False,
        description="Run even when tests x epochs x agent versions exceeds PLANNED_WORK_MAX (docs/limits.md).",
        json_schema_extra=declare(
            flag="--allow-large-run",
            env="AGENT_HEALTH_ALLOW_LARGE_RUN",
            help=f"Run even when tests x epochs x agent versions exceeds {PLANNED_WORK_MAX:,} (docs/limits.md).",
        ),
    )
    budget: BudgetSettings = Field(
        default_factory=BudgetSettings, description="Spend budget: max cost, max judge cost, max tokens."
    )
