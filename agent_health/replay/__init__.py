"""Record and replay of agent runs (see `agent_health.replay.store`)."""

from agent_health.model.settings import REPLAY_MODES
from agent_health.replay.store import (
    REPLAY_ENV,
    LocalRecordingStore,
    RecordingStore,
    ReplayConnector,
    open_recordings,
    recording_key,
)

__all__ = [
    "REPLAY_ENV",
    "REPLAY_MODES",
    "LocalRecordingStore",
    "RecordingStore",
    "ReplayConnector",
    "open_recordings",
    "recording_key",
]
