"""The names one eval root's definitions take in a Dagster deployment: asset keys, groups, jobs,
sensors, schedules, dynamic partition sets and the resource key. The default namespace (no prefix)
gives the code location's names as they always were; a prefix gives an eval root names of its own,
so several eval roots (each with its own agent versions, tests and resource) share one code location
and one instance without a collision (`agent_health_dagster.agent_health_definitions`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from dagster import AssetKey, DynamicPartitionsDefinition

from agent_health.errors import ConfigError
from agent_health_dagster.defs.names import (
    CALIBRATE_JOB,
    CALIBRATION_KEY,
    COMPARISON_KEY,
    JUDGE_IDENTITIES,
    LABELS_KEY,
    LEADERBOARD_KEY,
    REFRESH_JOB,
    safe,
)
from agent_health_dagster.defs.partitions import (
    AGENT_SETTINGS_KEY,
    AGENT_VERSIONS,
    agent_versions,
    judge_identities,
)

RESOURCE_KEY = "agent_health"  # the resource key of the default namespace


@cache
def _dynamic(name: str) -> DynamicPartitionsDefinition:
    """One definition object per dynamic partition set name (Dagster compares them by name)."""
    return {AGENT_VERSIONS: agent_versions, JUDGE_IDENTITIES: judge_identities}.get(name) or (
        DynamicPartitionsDefinition(name=name)
    )


@dataclass(frozen=True)
class Namespace:
    """`prefix` "" (the default): the code location's own names. A prefix ("team_a") is the first
    part of every asset key, and `<prefix>__` starts the name of everything the eval root has once
    (its refresh job, sensors, agent versions, benchmark group, resource key). A suite's own names
    carry it through the suite's key prefix (`SuiteNames`: `evaluate__team_a__<suite>`)."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if self.prefix and safe(self.prefix) != self.prefix:
            raise ConfigError(
                f"agent-health prefix {self.prefix!r}: use letters, digits and underscores, not starting "
                f"with a digit (e.g. {safe(self.prefix)!r}); it starts asset keys and Dagster names"
            )

    def name(self, name: str) -> str:
        """A job, sensor, schedule, op, group or partition set name in this namespace."""
        return f"{self.prefix}__{name}" if self.prefix else name

    def key(self, parts: list[str] | tuple[str, ...] | AssetKey) -> AssetKey:
        """An asset key in this namespace."""
        path = list(parts.path if isinstance(parts, AssetKey) else parts)
        return AssetKey([self.prefix, *path] if self.prefix else path)

    @property
    def key_prefix(self) -> tuple[str, ...]:
        return (self.prefix,) if self.prefix else ()

    @property
    def resource_key(self) -> str:
        return self.name(RESOURCE_KEY)

    def resource(self, context: Any) -> Any:
        """This namespace's AgentHealthResource, from an op's, sensor's or schedule's context: the
        definitions name its key in `required_resource_keys` (a parameter's name cannot follow
        the prefix). A sensor or schedule called directly (`sensor(build_sensor_context(...))`,
        as tests call them) is also given its required resources as keywords, which the
        functions take as `**_called` and leave: the context holds them either way."""
        return getattr(context.resources, self.resource_key)

    @property
    def agent_versions(self) -> str:
        return self.name(AGENT_VERSIONS)

    @property
    def agent_versions_def(self) -> DynamicPartitionsDefinition:
        return _dynamic(self.agent_versions)

    @property
    def judge_identities(self) -> str:
        return self.name(JUDGE_IDENTITIES)

    @property
    def judge_identities_def(self) -> DynamicPartitionsDefinition:
        return _dynamic(self.judge_identities)

    @property
    def settings_key(self) -> AssetKey:
        return self.key(AGENT_SETTINGS_KEY)

    @property
    def comparison_key(self) -> AssetKey:
        return self.key(COMPARISON_KEY)

    @property
    def leaderboard_key(self) -> AssetKey:
        return self.key(LEADERBOARD_KEY)

    @property
    def labels_key(self) -> AssetKey:
        return self.key(LABELS_KEY)

    @property
    def calibration_key(self) -> AssetKey:
        return self.key(CALIBRATION_KEY)

    @property
    def refresh_job(self) -> str:
        return self.name(REFRESH_JOB)

    @property
    def calibrate_job(self) -> str:
        return self.name(CALIBRATE_JOB)

    @property
    def leaderboard_job(self) -> str:
        return self.name("leaderboard")


DEFAULT = Namespace()
