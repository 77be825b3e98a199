"""Agent definitions: a key, a connector with settings, and versions that override settings."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator

from agent_health.errors import ConfigError
from agent_health.model.agent import ResolvedAgent
from agent_health.model.validation import KnownKeys
from agent_health.registry import registry


class AgentSpec(KnownKeys):
    """One agent. `KEY@VERSION` selects `versions[VERSION]`, merged over `settings`."""

    model_config = ConfigDict(frozen=True)
    settings_hint = "; connector settings (endpoint, timeout_s, ...) go under 'settings'"

    key: str = Field(description="Agent key used in KEY@VERSION.")
    connector: str = Field(
        "demo",
        description="Connector kind: demo, http, agui, subprocess, python, or one an installed package "
        "registers (entry point group agent_health.connectors; docs/extending.md).",
    )
    settings: dict[str, Any] = Field(default_factory=dict, description="Connector settings.")
    versions: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"default": dict[str, Any]()}, description="Version name -> settings overrides."
    )
    default_version: str | None = Field(None, description="Version used when none is given; the last one otherwise.")
    traces: bool = Field(False, description="Whether runs of this agent have traces to read.")
    description: str = ""

    @field_validator("key")
    @classmethod
    def _plain_key(cls, value: str) -> str:
        if not value.strip() or any(c in value for c in "@/") or value != value.strip():
            key, _, version = value.strip().partition("@")
            hint = f"; did you mean key {key!r} with versions={{{version!r}: {{}}}}?" if key and version else ""
            raise ValueError(
                f"agent key {value!r} must be non-empty, without '@', '/' or surrounding spaces "
                f"(KEY@VERSION splits at the '@'; versions go under 'versions'){hint}"
            )
        return value

    @field_validator("connector")
    @classmethod
    def _known_connector(cls, value: str) -> str:
        # the registry knows the built-in kinds and the installed plugins' without importing any
        return registry("agent_health.connectors").check(value)

    @field_validator("versions")
    @classmethod
    def _some_version(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not value:
            raise ValueError("an agent needs at least one version")
        for name, overrides in value.items():
            if not name or "@" in name or "/" in name:
                raise ValueError(f"version name {name!r} must be non-empty, without '@' or '/'")
            if not isinstance(overrides, dict):
                # Pydantic validator: only ValueError becomes a ValidationError.
                raise ValueError(f"version {name!r}: overrides must be a mapping of settings")  # noqa: TRY004
        return value

    def version_name(self, version: str | None = None) -> str:
        """The version `version` names (None: the default one); a ConfigError listing the known
        versions for an unknown one."""
        version = version or self.default_version or list(self.versions)[-1]
        if version not in self.versions:
            raise ConfigError(
                f"unknown version {version!r} of agent {self.key!r}; known: "
                + ", ".join(f"{self.key}@{v}" for v in self.versions)
            )
        return version

    def resolve(self, version: str | None = None) -> ResolvedAgent:
        """The agent at `version` (None: the default one): its connector and merged settings."""
        version = self.version_name(version)
        return ResolvedAgent(
            key=self.key,
            version=version,
            connector=self.connector,
            settings=merge_settings(self.settings, self.versions[version]),
            traces=self.traces,
        )

    @property
    def refs(self) -> list[str]:
        return [f"{self.key}@{v}" for v in self.versions]


# Mappings a version usually extends rather than replaces (a version adds one header, one env var).
MERGED_SETTINGS = frozenset({"headers", "env", "body", "forwarded_props", "state", "kwargs"})


def merge_settings(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A version's settings: overrides win; `headers`, `env`, `body`... merge one level deep."""
    merged = dict(base)
    for key, value in overrides.items():
        if key in MERGED_SETTINGS and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


DEMO_AGENT = AgentSpec(
    key="demo",
    connector="demo",
    versions={"v1": {}, "v2": {}},
    default_version="v2",
    traces=False,
    description="Built-in offline SRE agent (v1 shallow, v2 thorough); see agent_health.connectors.demo",
)
