"""How a run executes: the one typed settings object every transport builds.

The CLI builds it from flags, the environment and the configuration, the Dagster resource from
run config, tests directly; `agent_health.session.settings` holds the builder and writes down
the precedence rule (see docs/running.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_health.errors import ConfigError
from agent_health.model.limits import BudgetTokens, CostUSD, check_setting_numbers
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


class JudgeRunSettings(BaseModel):
    """The judge part of a run: skip mode, model override and cache."""

    model_config = ConfigDict(frozen=True)

    skip: bool = Field(False, description="Skip every judge() call (neutral, skipped verdicts).")
    model: str | None = Field(None, description="Judge model for this run (`provider:model`), over judge.model.")
    cache: bool = Field(True, description="Read and write the persistent judge cache.")
    require_calibrated: bool = Field(
        False,
        description="A gating judge that misses judge.calibration errors its verdicts and the run exits 2, "
        "instead of observing.",
    )


class BudgetSettings(BaseModel):
    """A run's spend budget (docs/budgets.md): once starting the next test could pass it, the run
    starts no more tests and reports the rest as not run, "budget reached". Each limit is off
    when None; costs come from the price table (`prices` and the bundled price database)."""

    model_config = ConfigDict(frozen=True)

    max_cost_usd: CostUSD | None = Field(None, description="Agent and judge spend together, in USD.")
    max_judge_cost_usd: CostUSD | None = Field(None, description="Judge spend alone, in USD.")
    max_tokens: BudgetTokens | None = Field(None, description="Agent and judge tokens together.")
    exit_code: Literal[0, 1] = Field(
        1, description="Exit code of a run the budget stopped when nothing else failed (--budget-exit)."
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

    agents: tuple[str, ...] = Field((), description="Agent versions to run, as KEY@VERSION; empty: the default agent.")
    # Bounded where a run's settings are built (`build_settings`, docs/limits.md), not here: a
    # stored run manifest written before a bound existed must still load.
    concurrency: int = Field(8, ge=1, description="Tests in flight at once, over all agent versions of the run.")
    timeout_s: float = Field(120.0, gt=0, description="Per-test timeout in seconds, for tests without their own.")
    epochs: int = Field(1, ge=1, description="Independent trials per test, for tests without their own.")
    fail_fast: bool = Field(False, description="Stop starting tests after the first failure or error.")
    judge: JudgeRunSettings = Field(default_factory=JudgeRunSettings, description="Judge skip, model and cache.")
    replay: ReplayMode = Field("off", description="Record/replay of agent runs: off, record, auto or strict.")
    labels: tuple[str, ...] = Field((), description="Only tests carrying every one of these labels.")
    grep: str | None = Field(None, description="Only tests whose name or id matches this regular expression.")
    shard: Shard | None = Field(
        None, description="Run only this shard of the tests selected by labels and grep (--shard INDEX/COUNT)."
    )
    only: tuple[OnlyRule, ...] = Field(
        (),
        description=(
            "Only tests that need a run, by the stored results (a union): missing (no stored result for the "
            "agent version), failed (the stored result did not pass), changed (the test's definition, the agent "
            "version's settings or the judge settings changed since). Empty: every selected test."
        ),
    )
    store: StoreSettings | None = Field(
        default_factory=StoreSettings, description="Where each result is stored as it finishes; None: not stored."
    )
    allow_large_run: bool = Field(
        False, description="Run even when tests x epochs x agent versions exceeds PLANNED_WORK_MAX (docs/limits.md)."
    )
    budget: BudgetSettings = Field(
        default_factory=BudgetSettings, description="Spend budget: max cost, max judge cost, max tokens."
    )
