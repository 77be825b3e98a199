"""Data versions of what a results partition depends on besides its test: the agent version's
effective settings and the judge settings (computed in `agent_health.config.fingerprints`, the
same hashes results record as provenance)."""

from agent_health.config.fingerprints import VERSION_LENGTH, agent_version_data_version, judge_settings

__all__ = ["VERSION_LENGTH", "agent_version_data_version", "judge_settings"]
