"""The project configuration (`agent_health_config.py` with `config = define_config(...)`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from agent_health.config.agents import DEMO_AGENT, AgentSpec
from agent_health.errors import ConfigError
from agent_health.model.agent import ResolvedAgent
from agent_health.model.calibration import CalibrationGate
from agent_health.model.limits import (
    PRICE_MAX,
    STEPS_MAX,
    TOOL_STEPS_MAX,
    Backoff,
    Chars,
    Concurrency,
    Retries,
    Wait,
    check_number,
    check_setting_numbers,
)
from agent_health.model.settings import (
    BudgetSettings,
    StoreSettings,
    check_replay_mode,
    check_store_settings,
    declared_settings,
)
from agent_health.model.validation import KnownKeys, describe_errors, did_you_mean
from agent_health.registry import Registry, registry

# Marks a judge setting that changes how verdicts are fetched (speed, retries, caching), never what
# they say: the judge settings fingerprint leaves these out and counts every other field, so a new
# field counts unless it is declared operational here.
_HOW: dict[str, Any] = {"verdict": False}


def verdict_fields(model: type[KnownKeys]) -> list[str]:
    """The fields of a settings model that can change a verdict (all but those marked `_HOW`)."""
    return [
        name
        for name, field in model.model_fields.items()
        if not (isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("verdict") is False)
    ]


class JudgeSettings(KnownKeys):
    """Which judge provider runs `judge()` and how (see agent_health/judges/service.py).

    A judge model is named `provider:model` (e.g. `openai:gpt-4o-mini`, `bedrock:anthropic.claude-3-5-haiku-...`,
    `demo`) or a bare model id of the default `provider`. It can be chosen per run (`model`), per test
    (`per_test`) and per call (`judge(..., model=...)`).
    """

    model_config = ConfigDict(frozen=True)

    provider: str = Field(
        "demo",
        description="Default provider: demo (offline heuristic), openai, bedrock, a kind an installed package "
        "registers (entry point group agent_health.judges; docs/extending.md), or a name from `providers`.",
    )
    model: str | None = Field(None, description="Judge model id of the default provider.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings of the default provider (openai: "
        "base_url, api_key_env, temperature, max_tokens, json_mode, timeout_s, headers, max_response_bytes; "
        "bedrock: region, profile, endpoint_url, inference_config, timeout_s).",
    )
    providers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="More named providers: {name: {type: openai|bedrock|<registered kind>, model: ..., <settings>}}.",
    )
    per_test: dict[str, str] = Field(default_factory=dict, description="Test id glob -> judge model for those tests.")
    rubrics: dict[str, str] = Field(
        default_factory=dict,
        description="Evaluator name -> agent-health evaluator JSON "
        "file (relative to the project root), usable as judge(..., evaluator=name).",
    )
    concurrency: Concurrency = Field(
        8, description="Judge calls in flight at once, apart from the agent's limit.", json_schema_extra=_HOW
    )
    cache: bool = Field(True, description="Use the persistent judge cache.", json_schema_extra=_HOW)
    cache_file: str = Field(
        "judge_cache.sqlite", description="Cache file, relative to the state folder.", json_schema_extra=_HOW
    )
    max_retries: Retries = Field(
        4, description="Retries after a rate-limit answer (429, throttling).", json_schema_extra=_HOW
    )
    backoff_s: Backoff = Field(
        1.0, description="First rate-limit backoff delay (doubles, with jitter).", json_schema_extra=_HOW
    )
    backoff_max_s: Backoff = Field(
        30.0, description="Longest single backoff delay (caps Retry-After too).", json_schema_extra=_HOW
    )
    max_output_chars: Chars = Field(12000, ge=100, description="Output characters the judge sees.")
    max_step_chars: Chars = Field(2000, ge=50, description="Characters per trajectory step (long tool outputs cut).")
    max_steps: int = Field(200, ge=1, le=STEPS_MAX, description="Trajectory steps the judge sees.")
    max_trace_chars: Chars = Field(12000, ge=100, description="Characters of spans/logs, and per judge tool result.")
    max_tool_steps: int = Field(
        6, ge=1, le=TOOL_STEPS_MAX, description="Model turns an agentic judge may spend calling tools."
    )
    calibration: CalibrationGate | None = Field(
        None,
        description="{min_kappa, min_labels}: a gating judge whose newest calibration (agent-health calibrate) "
        "misses it, or that has none, runs but only observes (docs/judges.md).",
    )

    @field_validator("settings", "providers")
    @classmethod
    def _no_inline_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        flat = [value] + [v for v in value.values() if isinstance(v, dict)]
        for d in flat:
            for k in d:
                if str(k).lower() in ("api_key", "apikey", "secret", "password", "token", "aws_secret_access_key"):
                    raise ValueError(
                        f"judge setting {k!r}: secrets never go in the configuration; name an "
                        "environment variable instead (api_key_env) or use the AWS credential chain"
                    )
        return value

    @model_validator(mode="after")
    def _known_providers(self) -> JudgeSettings:
        check_setting_numbers(self.settings, "judge.settings")
        for name, conf in self.providers.items():
            check_setting_numbers(conf, f"judge.providers[{name!r}]")
        kinds = judge_providers()  # built-in kinds and the installed plugins', none of them imported
        if self.provider not in self.providers and self.provider not in kinds:
            raise ValueError(
                f"judge.provider {self.provider!r} unknown{did_you_mean(self.provider, kinds.kinds())}; use one of "
                f"{kinds.kinds()} or a name from judge.providers (more kinds come from installed packages' "
                f"{kinds.group!r} entry points)"
            )
        for name, conf in self.providers.items():
            kind = conf.get("type", name)
            if kind not in kinds:
                raise ValueError(
                    f"judge.providers[{name!r}]: type {kind!r} unknown{did_you_mean(str(kind), kinds.kinds())}; "
                    f"use one of {kinds.kinds()}"
                )
        if self.model:
            self.check_model(self.model, "judge.model")
        for pattern, spec in self.per_test.items():
            self.check_model(spec, f"judge.per_test[{pattern!r}]")
        return self

    def names_provider(self, name: str) -> bool:
        """Whether `name` is a provider: a name from `providers`, or a registered kind."""
        return name in self.providers or name in judge_providers()

    def check_model(self, spec: str, setting: str) -> None:
        """Raise ValueError naming `setting` when `spec` cannot name a judge: a `provider:model` whose
        provider is a misspelt one, or any model for the offline demo provider (which takes none)."""
        head, sep, _ = spec.partition(":")
        builtin = judge_providers().builtins
        if spec in builtin or spec in self.providers or (sep and (head in builtin or head in self.providers)):
            return  # the common case, decided without reading the installed packages' entry points
        default_type = str(self.providers.get(self.provider, {}).get("type", self.provider))
        if default_type != "demo" and not sep:
            return  # a bare model id of the default provider
        if self.names_provider(spec) or (sep and self.names_provider(head)):
            return
        names = [*judge_providers().kinds(), *self.providers]
        hint = did_you_mean(head, names)
        if default_type == "demo":
            raise ValueError(
                f"{setting}: {spec!r} names no judge provider, and the default provider {self.provider!r} "
                f"(the offline heuristic) takes no model; give PROVIDER:MODEL with a provider of "
                f"{', '.join(names)}{hint}"
            )
        if hint:  # "opnai:gpt-4o"; a bare id with a colon ("ft:gpt-4o:org", "...-v1:0") stays the model's
            raise ValueError(f"{setting}: unknown judge provider {head!r} in {spec!r}{hint}")


def judge_providers() -> Registry:
    """The judge provider registry (agent_health/judges/registry.py)."""
    return registry("agent_health.judges")


class TraceSettings(KnownKeys):
    """Where traces come from (see docs/traces.md). Agents opt in with `traces=True`; the demo
    agent has traces whenever the source is `local`."""

    model_config = ConfigDict(frozen=True)

    source: Literal["local", "otel", "opensearch", "none"] = Field(
        "local",
        description="local (span files under the state folder), otel (OpenTelemetry spans captured for the "
        "runs, in process and by an OTLP/HTTP receiver on 127.0.0.1, kept in the same folder), opensearch, or none.",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Source settings. local: path. opensearch: url, index, logs_index, auth, TLS options, "
            "exclude_services, run_id_attributes, window_slack_s, batch_size. Both: service_name "
            "(for the time-window fallback). Put secrets in the environment (password_env)."
        ),
    )
    wait_s: Wait = Field(10.0, description="How long `result.traces` waits for spans to land.")
    metrics_wait_s: Wait = Field(
        0.0, description=("How long deriving trace metrics after a test waits for spans (0: one look).")
    )

    @field_validator("settings")
    @classmethod
    def _bounded_numbers(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_setting_numbers(value, "traces.settings")
        return value

    def __repr_args__(self) -> Any:
        # Never show secrets a user put inline (auth.password, tokens) in logs or the Dagster UI.
        for name, value in super().__repr_args__():
            yield name, (_masked(value) if name == "settings" else value)


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (
                "***"
                if any(w in str(k).lower() for w in ("password", "secret", "token")) and not str(k).endswith("_env")
                else _masked(v)
            )
            for k, v in value.items()
        }
    return value


def _run_setting_fields() -> dict[str, Any]:
    """A field for each run setting declared with a top-level configuration key (`Declared.config`),
    bounded as a user's value must be (docs/limits.md), with the run setting's default. Config
    redefines the few whose configuration form differs (`store`, `replay`)."""
    out: dict[str, Any] = {}
    for d in declared_settings():
        key = d.declared.config
        if key and "." not in key:
            kind = d.declared.bounded if d.declared.bounded is not None else d.field.annotation
            default = d.field.get_default(call_default_factory=True)
            out[key] = (kind, Field(default, description=d.field.description))
    return out


class Config(create_model("_ConfigRunSettings", __base__=KnownKeys, **_run_setting_fields())):  # type: ignore[misc]
    """Everything configurable. Defaults are the embedded ones: demo agent, demo judge, local files.
    The run settings declared with a configuration key (`concurrency`, `timeout_s`, `epochs`, ...;
    agent_health.model.settings.Declared) are fields too, from their declarations."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    settings_name = "define_config"

    agents: dict[str, AgentSpec] = Field(default_factory=lambda: {"demo": DEMO_AGENT})
    default_agent: str = Field("demo@v2", description="Agent version used when none is given.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    evaluators: dict[str, Callable[..., Any]] = Field(default_factory=dict, description="Custom evaluators.")
    insights: Any = Field(None, description="Optional insight synthesizer: a callable, or 'llm'.")
    traces: TraceSettings = Field(default_factory=TraceSettings)
    eval_root: str = Field("evals", description="Where eval files live, relative to the project root.")
    state_dir: str = Field(".agent_health", description="Results, caches and spans, relative to the root.")
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="Model -> (USD per 1M input, per 1M output)."
    )
    store: StoreSettings = Field(
        default_factory=StoreSettings, description="Where results are stored: local (default), s3 or opensearch."
    )
    budget: BudgetSettings = Field(
        default_factory=BudgetSettings,
        description="Spend budget of every run: max_cost_usd, max_judge_cost_usd, max_tokens, exit_code "
        "(docs/budgets.md; --max-cost and the other flags win).",
    )
    replay: str = Field(
        "off",
        description="Record/replay of agent runs: off, record, auto or strict "
        "(overridden by --replay and $AGENT_HEALTH_REPLAY).",
    )
    root: str = Field(".", description="Project root (the folder of the configuration file).")
    source: str | None = Field(None, description="Path of the configuration file, if any.")

    @field_validator("agents", mode="before")
    @classmethod
    def _agents(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            keyed: dict[Any, Any] = {}
            for i, agent in enumerate(value):
                key = agent.key if isinstance(agent, AgentSpec) else dict(agent).get("key")
                if not isinstance(key, str):
                    # Pydantic validator: only ValueError becomes a ValidationError.
                    raise ValueError(f"agents[{i}]: every agent needs a 'key' (the part before '@' in KEY@VERSION)")  # noqa: TRY004
                if key in keyed:
                    raise ValueError(
                        f"agents[{i}]: duplicate agent key {key!r}; give each agent its own key "
                        "(versions of one agent go under its 'versions')"
                    )
                keyed[key] = agent
            value = keyed
        return value

    @model_validator(mode="after")
    def _default_agent_known(self) -> Config:
        if "default_agent" not in self.model_fields_set:  # the built-in default, or agents without one
            return self
        key, _, version = self.default_agent.partition("@")
        spec = self.agents.get(key)
        if spec is None or (version and version not in spec.versions):
            refs = self.agent_refs()
            raise ValueError(
                f"default_agent {self.default_agent!r} is not a configured agent version"
                f"{did_you_mean(self.default_agent, refs)} (known: {', '.join(refs)})"
            )
        return self

    @field_validator("replay")
    @classmethod
    def _replay(cls, value: str) -> str:
        return check_replay_mode(value)

    @field_validator("store")
    @classmethod
    def _store(cls, value: StoreSettings) -> StoreSettings:
        check_store_settings(value)
        return value

    @field_validator("prices")
    @classmethod
    def _bounded_prices(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for model, pair in value.items():
            for side, price in zip(("input", "output"), pair):
                check_number(price, f"prices[{model!r}] ({side}, USD per 1M tokens)", 0, PRICE_MAX)
        return value

    def agent(self, ref: str) -> ResolvedAgent:
        """Resolve KEY@VERSION (or KEY for its default version): its connector and merged settings.
        A run resolves each of its agent versions once and passes the result down."""
        return self._agent_spec(ref).resolve(ref.partition("@")[2] or None)

    def agent_ref(self, ref: str) -> str:
        """The KEY@VERSION `ref` names (KEY alone: its default version), checked as `agent` checks
        it but without resolving its settings."""
        key, _, version = ref.partition("@")
        return f"{key}@{self._agent_spec(ref).version_name(version or None)}"

    def _agent_spec(self, ref: str) -> AgentSpec:
        key = ref.partition("@")[0]
        spec = self.agents.get(key)
        if spec is None:
            refs = self.agent_refs()
            raise ConfigError(f"unknown agent {ref!r}; known: {', '.join(refs)}{did_you_mean(key, self.agents)}")
        return spec

    def agent_refs(self) -> list[str]:
        return [r for spec in self.agents.values() for r in spec.refs]

    def path(self, relative: str) -> Path:
        return (Path(self.root) / relative).resolve()

    @property
    def state_path(self) -> Path:
        return self.path(self.state_dir)


def define_config(**kwargs: Any) -> Config:
    """Build the configuration. Agents given here are added to the built-in demo agent."""
    agents = kwargs.pop("agents", None)
    merged: dict[str, Any] = {"demo": DEMO_AGENT}
    try:
        if agents:
            merged.update(Config._agents(agents))
        return Config(agents=merged, **kwargs)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration: {describe_errors(exc)}") from None
    except Exception as exc:
        raise ConfigError(f"invalid configuration: {exc}") from exc
