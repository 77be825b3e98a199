"""Record and replay: re-run test bodies and re-judge without re-running the agent.

Modes: `off` (default: always run the agent), `record` (run and store), `auto` (replay when a
recording exists, else run and store), `strict` (replay; a missing recording is an error). A
recording is keyed by a hash of the agent key and version, prompt, context and provisioned inputs
(`provisioned`, `files`, `env`), and holds the full `RunResult` with the connector's secrets
removed. A replayed result has `replayed=True` and keeps the recorded run id and trace id, so
traces of the original run stay reachable.

Recordings live in files under the state folder by default, or on the result store's S3 bucket
or OpenSearch cluster when the store is shared, so every worker replays the same runs. There, a
recording made in `auto` mode is a conditional write (the first worker's recording stays and
every worker replays it); `record` mode replaces it on purpose.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import agent_health.backends as backends
from agent_health.backends import is_shared
from agent_health.config.secrets import scrub_model, scrub_secrets
from agent_health.connectors.base import Connector
from agent_health.connectors.conversation import OnTurn, UserSide, UserTurn, transcript
from agent_health.errors import AgentError
from agent_health.files import create_file, open_atomic, safe_name
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.settings import StoreSettings, check_replay_mode

REPLAY_ENV = "AGENT_HEALTH_REPLAY"
FORMAT = 1


# What the harness adds to a run's env that changes with every run: the run's own OTLP endpoint
# (agent_health.traces.capture), like the run id, is no part of what determines the run.
_PER_RUN_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT",)


def recording_key(agent_key: str, version: str, request: AgentRequest) -> str:
    """Stable hash of what determines an agent run (never the run id, trace ids or timeout). A
    turn of a conversation adds the test, its number and the conversation before it (never the
    conversation's id or its session: they differ on every run): two tests whose conversations open
    with the same message keep their own recordings, so each replays the conversation it had."""
    material: dict[str, Any] = {
        "agent": agent_key,
        "version": version,
        "prompt": request.prompt,
        "context": list(request.context),
        "provisioned": request.provisioned,
        "files": request.files,
        "env": {k: v for k, v in request.env.items() if k not in _PER_RUN_ENV},
    }
    if request.turn:  # only then: the recordings of runs of one turn keep their keys
        material["conversation"] = {"test": request.test_id, "turn": request.turn, "history": list(request.history)}
    return _digest(material)


def user_turn_key(agent_key: str, version: str, request: AgentRequest, user: dict[str, Any], so_far: Any) -> str:
    """Stable hash of what decides a simulated user's next message: the user's definition, the
    test's prompt and context, and the conversation so far (`transcript`). Prefixed `user-`."""
    material = {
        "agent": agent_key,
        "version": version,
        "user": user,
        "prompt": request.prompt,
        "context": list(request.context),
        "so_far": so_far,
    }
    return "user-" + _digest(material)


def _digest(material: dict[str, Any]) -> str:
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _document(agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "key": key,
        "agent": f"{agent_key}@{version}",
        "test_id": request.test_id,
        "result": scrub_model(result).model_dump(mode="json"),  # whoever saves: no known secret is stored
    }


def _run_of(doc: Any, where: str) -> RunResult:
    try:
        return RunResult.model_validate(doc["result"])
    except (ValidationError, KeyError, TypeError) as exc:  # not a mapping, no "result", or invalid
        raise AgentError(f"recording {where} is not a valid run: {exc}; delete it or re-record") from None


def _checked(agent_key: str, version: str, key: str) -> None:
    for what, part in (("agent key", agent_key), ("version", version), ("key", key)):
        if not isinstance(part, str) or not part:
            raise ValueError(f"recording {what}: expected a non-empty string, got {part!r}")


class RecordingStore(abc.ABC):
    """Recordings of agent runs, one per (agent key, version, recording key): the interface
    `ReplayConnector` takes. Implementations: `LocalRecordingStore` (files, the default),
    `S3RecordingStore` and `OpenSearchRecordingStore` (shared).

    The contract (tests/stores/test_recording_store_contract.py runs it on all three): `load`
    gives the saved run or None, and one clear AgentError naming the recording when it is
    unreadable; `save` stores the run with known secrets scrubbed, whole (a reader never sees
    part of it), replacing a recording with `replace=True` and keeping the first one otherwise
    (also when writers race); distinct non-empty key parts never share a recording; recordings
    outlive the object."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the recordings live, for messages (never holds a secret)."""

    @abc.abstractmethod
    def where(self, agent_key: str, version: str, key: str) -> str:
        """Where the recording of `key` lives, for messages."""

    @abc.abstractmethod
    def _read(self, agent_key: str, version: str, key: str) -> Any:
        """The stored document (decoded JSON), or None when there is none; an AgentError naming
        it when it cannot be read."""

    @abc.abstractmethod
    def _write(self, agent_key: str, version: str, key: str, doc: dict[str, Any], *, replace: bool) -> None:
        """Store `doc` whole; with `replace` False only when there is no recording yet."""

    def load(self, agent_key: str, version: str, key: str) -> RunResult | None:
        """The recorded run, or None when there is no recording."""
        _checked(agent_key, version, key)
        doc = self._read(agent_key, version, key)
        return None if doc is None else _run_of(doc, self.where(agent_key, version, key))

    def load_user_turn(self, agent_key: str, version: str, key: str) -> UserTurn | None:
        """The recorded decision of a simulated user, or None when there is none."""
        _checked(agent_key, version, key)
        doc = self._read(agent_key, version, key)
        if doc is None:
            return None
        where = self.where(agent_key, version, key)
        return UserTurn.of(doc.get("user_turn") if isinstance(doc, dict) else None, where)

    def save_user_turn(
        self, agent_key: str, version: str, key: str, turn: UserTurn, request: AgentRequest, *, replace: bool = True
    ) -> str:
        """Store a simulated user's decision beside the agent's turns (`replace=False`: keep one
        that exists). Returns where it lives."""
        _checked(agent_key, version, key)
        doc = {
            "format": FORMAT,
            "key": key,
            "agent": f"{agent_key}@{version}",
            "test_id": request.test_id,
            "user_turn": scrub_secrets(turn.document()),
        }
        self._write(agent_key, version, key, doc, replace=replace)
        return self.where(agent_key, version, key)

    def save(
        self, agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest, *, replace: bool = True
    ) -> str:
        """Store a recording (`replace=False`: keep one that exists). Returns where it lives."""
        _checked(agent_key, version, key)
        self._write(agent_key, version, key, _document(agent_key, version, key, result, request), replace=replace)
        return self.where(agent_key, version, key)


def _parse(data: bytes | str, where: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise AgentError(f"recording {where} is unreadable: {exc}; delete it or re-record") from None


class LocalRecordingStore(RecordingStore):
    """Recordings as JSON files `<root>/<agent key>/<version>/<key>.json` (each part a safe,
    distinct name: `agent_health.files.safe_name`), written atomically."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    @property
    def location(self) -> str:
        return str(self.root)

    def path(self, agent_key: str, version: str, key: str) -> Path:
        return self.root / safe_name(agent_key) / safe_name(version) / f"{safe_name(key)}.json"

    def where(self, agent_key: str, version: str, key: str) -> str:
        return str(self.path(agent_key, version, key))

    def _read(self, agent_key: str, version: str, key: str) -> Any:
        path = self.path(agent_key, version, key)
        legacy = self.root / _legacy(agent_key) / _legacy(version) / f"{key}.json"
        for candidate in (path, legacy) if legacy != path else (path,):
            try:
                return _parse(candidate.read_bytes(), str(candidate))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise AgentError(f"recording {candidate} is unreadable: {exc}; delete it or re-record") from None
        return None

    def _write(self, agent_key: str, version: str, key: str, doc: dict[str, Any], *, replace: bool) -> None:
        path = self.path(agent_key, version, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if replace:
            with open_atomic(path, fsync=False) as fh:  # readers never see half a recording
                json.dump(doc, fh, ensure_ascii=False, indent=1)
        else:  # the first writer's recording stays, also when two write at once
            create_file(str(path.parent), path.name, json.dumps(doc, ensure_ascii=False, indent=1).encode())


class S3RecordingStore(RecordingStore):
    """Recordings as objects `<prefix>/recordings/<agent key>/<version>/<key>.json` in the store's
    bucket (names as `LocalRecordingStore`'s); `replace=False` is a conditional write."""

    def __init__(self, settings: dict[str, Any]):
        self.bucket = backends.S3Bucket(settings, "store.settings")

    @property
    def location(self) -> str:
        return f"{self.bucket.location} recordings/"

    def _key(self, agent_key: str, version: str, key: str) -> str:
        return self.bucket.key("recordings", safe_name(agent_key), safe_name(version), f"{safe_name(key)}.json")

    def where(self, agent_key: str, version: str, key: str) -> str:
        return f"s3://{self.bucket.bucket}/{self._key(agent_key, version, key)}"

    def _read(self, agent_key: str, version: str, key: str) -> Any:
        found = self.bucket.get(self._key(agent_key, version, key))
        legacy = self.bucket.key("recordings", _legacy(agent_key), _legacy(version), f"{key}.json")
        if found is None and legacy != self._key(agent_key, version, key):
            found = self.bucket.get(legacy)
        return None if found is None else _parse(found, self.where(agent_key, version, key))

    def _write(self, agent_key: str, version: str, key: str, doc: dict[str, Any], *, replace: bool) -> None:
        blob = json.dumps(doc, ensure_ascii=False).encode()
        self.bucket.put(self._key(agent_key, version, key), blob, if_absent=not replace)


RECORDINGS_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "key": {"type": "keyword"},
        "agent": {"type": "keyword"},
        "test_id": {"type": "keyword"},
        "format": {"type": "integer"},
        "result": {"type": "object", "enabled": False},
    },
}


class OpenSearchRecordingStore(RecordingStore):
    """Recordings as documents (id = agent key, version and key) in `<store index>-recordings`;
    `replace=False` is a create-only write."""

    def __init__(self, settings: dict[str, Any]):
        index = f"{settings.get('index', 'agent-health-results')}-recordings"
        self.index = backends.OpenSearchIndex(settings, index, RECORDINGS_MAPPING, "store.settings")

    @property
    def location(self) -> str:
        return self.index.location

    def where(self, agent_key: str, version: str, key: str) -> str:
        return f"{self.index.location} document {self.index.doc_id(agent_key, version, key)}"

    def _read(self, agent_key: str, version: str, key: str) -> Any:
        return self.index.get(self.index.doc_id(agent_key, version, key))

    def _write(self, agent_key: str, version: str, key: str, doc: dict[str, Any], *, replace: bool) -> None:
        self.index.put(self.index.doc_id(agent_key, version, key), doc, if_absent=not replace)


def open_recordings(store: StoreSettings | None, local_root: str | os.PathLike[str]) -> RecordingStore:
    """The recordings of a run: on the store's backend when the store is shared (an s3 or
    opensearch store, unless its `shared` setting is false), else files under `local_root`."""
    if store is not None and is_shared(store):
        if store.type == "s3":
            return S3RecordingStore(dict(store.settings))
        if store.type == "opensearch":
            return OpenSearchRecordingStore(dict(store.settings))
    return LocalRecordingStore(local_root)


def _legacy(part: str) -> str:
    """The folder name earlier versions gave a key part (lossy: "a b" and "a_b" met), still read."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part) or "_"


class ReplayConnector(Connector):
    """Wraps any connector with record/replay; transparent when mode is `off`."""

    def __init__(self, inner: Connector, store: RecordingStore, mode: str):
        super().__init__(inner.agent)
        self.inner = inner
        self.store = store
        self.mode = check_replay_mode(mode)

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    def conversation_problem(self) -> str | None:
        return self.inner.conversation_problem()

    def session_of(self, result: RunResult) -> dict[str, Any]:
        return self.inner.session_of(result)

    async def converse(self, request: AgentRequest, user: UserSide, on_turn: OnTurn | None = None) -> RunResult:
        """The conversation with every turn recorded or replayed (each turn is a `run`), and a
        simulated user's decisions too: a strict replay asks neither the agent nor the user's model."""
        if self.mode == "off":
            return await self.inner.converse(request, user, on_turn)
        recorded = user if user.recording() is None else _RecordedUser(user, self, request)
        return await super().converse(request, recorded, on_turn)

    async def run(self, request: AgentRequest) -> RunResult:
        if self.mode == "off":
            return await self.inner.run(request)
        agent = self.inner.agent
        key = recording_key(agent.key, agent.version, request)
        if self.mode in ("auto", "strict"):
            recorded = self.store.load(agent.key, agent.version, key)
            if recorded is not None:
                return recorded.model_copy(update={"replayed": True})
            if self.mode == "strict":
                raise AgentError(
                    f"agent {agent.ref} ({self.endpoint}): no recording for this prompt and context "
                    f"(replay mode strict; expected {self.store.where(agent.key, agent.version, key)}); "
                    "record it with --replay record or auto"
                )
        result = await self.inner.run(request)
        # In auto mode a recording another worker made meanwhile stays (all replay the same run).
        self.store.save(
            agent.key, agent.version, key, _scrubbed(self.inner, result), request, replace=self.mode == "record"
        )
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


class _RecordedUser(UserSide):
    """A simulated user whose decisions are recorded and replayed like the agent's turns."""

    def __init__(self, inner: UserSide, replay: ReplayConnector, request: AgentRequest):
        self.inner, self.replay, self.request = inner, replay, request
        self.mode = inner.mode  # type: ignore[misc]
        self.goal, self.label = inner.goal, inner.label

    def recording(self) -> dict[str, Any] | None:
        return self.inner.recording()

    async def next(self, so_far: RunResult | None) -> UserTurn:
        replay, agent = self.replay, self.replay.inner.agent
        definition = self.inner.recording() or {}
        key = user_turn_key(agent.key, agent.version, self.request, definition, transcript(so_far))
        if replay.mode in ("auto", "strict"):
            recorded = replay.store.load_user_turn(agent.key, agent.version, key)
            if recorded is not None:
                return recorded
            if replay.mode == "strict":
                turn = len(so_far.turns) if so_far is not None else 0
                raise AgentError(
                    f"agent {agent.ref} ({replay.endpoint}): no recording of the simulated user's "
                    + (f"message after turn {turn}" if turn else "opening message")
                    + f" (replay mode strict; expected {replay.store.where(agent.key, agent.version, key)}); "
                    "record it with --replay record or auto"
                )
        decision = await self.inner.next(so_far)
        replay.store.save_user_turn(
            agent.key, agent.version, key, decision, self.request, replace=replay.mode == "record"
        )
        return decision


def _scrubbed(connector: Connector, result: RunResult) -> RunResult:
    scrub = getattr(connector, "scrub", None)  # real connectors know their secrets; demo has none
    return scrub_model(scrub(result) if scrub else result)


__all__ = [
    "FORMAT",
    "REPLAY_ENV",
    "LocalRecordingStore",
    "OpenSearchRecordingStore",
    "RecordingStore",
    "ReplayConnector",
    "S3RecordingStore",
    "open_recordings",
    "recording_key",
    "user_turn_key",
]
