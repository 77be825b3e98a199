"""Record and replay of agent runs (see `agent_health.replay.store`)."""

from agent_health.replay.store import REPLAY_ENV, REPLAY_MODES, RecordingStore, ReplayConnector, recording_key

__all__ = ["REPLAY_ENV", "REPLAY_MODES", "RecordingStore", "ReplayConnector", "recording_key"]
