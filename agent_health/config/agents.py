"""Agent definitions: a key, a connector with settings, and versions that override settings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_health.connectors.base import ResolvedAgent
from agent_health.sdk.errors import ConfigError


class AgentSpec(BaseModel):
    """One agent. `KEY@VERSION` selects `versions[VERSION]`, merged over `settings`."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Agent key used in KEY@VERSION.")
    connector: str = Field("demo", description="Connector name: demo, http, agui, subprocess, python.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Connector settings.")
    versions: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"default": {}},
                                                description="Version name -> settings overrides.")
    default_version: str | None = Field(None, description="Version used when none is given; the last one otherwise.")
    traces: bool = Field(False, description="Whether runs of this agent have traces to read.")
    description: str = ""

    def resolve(self, version: str | None = None) -> ResolvedAgent:
        version = version or self.default_version or list(self.versions)[-1]
        if version not in self.versions:
            raise ConfigError(f"unknown version {version!r} of agent {self.key!r}; known: "
                              + ", ".join(f"{self.key}@{v}" for v in self.versions))
        return ResolvedAgent(key=self.key, version=version, connector=self.connector,
                             settings={**self.settings, **self.versions[version]}, traces=self.traces)

    @property
    def refs(self) -> list[str]:
        return [f"{self.key}@{v}" for v in self.versions]


DEMO_AGENT = AgentSpec(
    key="demo", connector="demo", versions={"v1": {}, "v2": {}}, default_version="v2", traces=False,
    description="Built-in offline SRE agent (v1 shallow, v2 thorough); see agent_health.connectors.demo",
)
