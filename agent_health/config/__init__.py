"""Project configuration."""

from agent_health.config.agents import DEMO_AGENT, AgentSpec
from agent_health.config.deployment import (
    DeploymentSettings,
    OpenSearchDefaults,
    check_cron,
    deployment_declarations,
    deployment_settings,
    deployment_variable,
    opensearch_defaults,
    sized_run_seconds,
)
from agent_health.config.loader import CONFIG_ENV, CONFIG_FILE, find_config, load_config
from agent_health.config.model import Config, JudgeSettings, TraceSettings, define_config

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEMO_AGENT",
    "AgentSpec",
    "Config",
    "DeploymentSettings",
    "JudgeSettings",
    "OpenSearchDefaults",
    "TraceSettings",
    "check_cron",
    "define_config",
    "deployment_declarations",
    "deployment_settings",
    "deployment_variable",
    "find_config",
    "load_config",
    "opensearch_defaults",
    "sized_run_seconds",
]
