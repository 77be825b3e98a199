"""The project configuration (`agent_health_config.py` with `config = define_config(...)`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_health.config.agents import DEMO_AGENT, AgentSpec
from agent_health.connectors.base import ResolvedAgent
from agent_health.sdk.errors import ConfigError


class JudgeSettings(BaseModel):
    """Which judge provider runs `judge()` and how."""

    model_config = ConfigDict(frozen=True)

    provider: str = Field("demo", description="demo (offline heuristic), openai, or bedrock.")
    model: str | None = Field(None, description="Judge model id.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Provider settings.")
    concurrency: int = Field(8, description="Judge calls in flight at once, apart from the agent's limit.")
    cache: bool = Field(True, description="Use the persistent judge cache.")


class TraceSettings(BaseModel):
    """Where traces come from."""

    model_config = ConfigDict(frozen=True)

    source: str = Field("local", description="local (span files), opensearch, or none.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Source settings.")
    wait_s: float = Field(10.0, description="How long a traces read waits for spans to land.")


class Config(BaseModel):
    """Everything configurable. Defaults are the embedded ones: demo agent, demo judge, local files."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    agents: dict[str, AgentSpec] = Field(default_factory=lambda: {"demo": DEMO_AGENT})
    default_agent: str = Field("demo@v2", description="Agent version used when none is given.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    evaluators: dict[str, Callable[..., Any]] = Field(default_factory=dict, description="Custom evaluators.")
    insights: Any = Field(None, description="Optional insight synthesizer: a callable, or 'llm'.")
    traces: TraceSettings = Field(default_factory=TraceSettings)
    eval_root: str = Field("evals", description="Where eval files live, relative to the project root.")
    state_dir: str = Field(".agent_health", description="Results, caches and spans, relative to the root.")
    concurrency: int = Field(8, description="Tests in flight at once.")
    timeout_s: float = Field(120.0, description="Default per-test timeout.")
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict,
                                                   description="Model -> (USD per 1M input, per 1M output).")
    root: str = Field(".", description="Project root (the folder of the configuration file).")
    source: str | None = Field(None, description="Path of the configuration file, if any.")

    @field_validator("agents", mode="before")
    @classmethod
    def _agents(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            value = {(a.key if isinstance(a, AgentSpec) else a["key"]): a for a in value}
        return value

    def agent(self, ref: str) -> ResolvedAgent:
        """Resolve KEY@VERSION (or KEY for its default version)."""
        key, _, version = ref.partition("@")
        spec = self.agents.get(key)
        if spec is None:
            raise ConfigError(f"unknown agent {ref!r}; known: {', '.join(self.agent_refs())}")
        return spec.resolve(version or None)

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
    if agents:
        merged.update(Config._agents(agents))
    try:
        return Config(agents=merged, **kwargs)
    except Exception as exc:
        raise ConfigError(f"invalid configuration: {exc}") from exc
