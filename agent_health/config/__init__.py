"""Project configuration."""

from agent_health.config.agents import DEMO_AGENT, AgentSpec
from agent_health.config.loader import CONFIG_ENV, CONFIG_FILE, find_config, load_config
from agent_health.config.model import Config, JudgeSettings, TraceSettings, define_config

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEMO_AGENT",
    "AgentSpec",
    "Config",
    "JudgeSettings",
    "TraceSettings",
    "define_config",
    "find_config",
    "load_config",
]
