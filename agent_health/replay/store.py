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

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from agent_health.backends import is_shared
from agent_health.config.secrets import scrub_model
from agent_health.connectors.base import Connector
from agent_health.errors import AgentError
from agent_health.files import open_atomic
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.settings import StoreSettings, check_replay_mode

REPLAY_ENV = "AGENT_HEALTH_REPLAY"
FORMAT = 1


def recording_key(agent_key: str, version: str, request: AgentRequest) -> str:
    """Stable hash of what determines an agent run (never the run id, trace ids or timeout)."""
    material = {
        "agent": agent_key,
        "version": version,
        "prompt": request.prompt,
        "context": list(request.context),
        "provisioned": request.provisioned,
        "files": request.files,
        "env": request.env,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _document(agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "key": key,
        "agent": f"{agent_key}@{version}",
        "test_id": request.test_id,
        "result": result.model_dump(mode="json"),
    }


def _run_of(doc: Any, where: str) -> RunResult:
    try:
        return RunResult.model_validate(doc["result"])
    except Exception as exc:
        raise AgentError(f"recording {where} is not a valid run: {exc}; delete it or re-record") from None


class RecordingStore:
    """Recordings as JSON files: `<root>/<agent key>/<version>/<hash>.json`, written atomically."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path(self, agent_key: str, version: str, key: str) -> Path:
        return self.root / _safe(agent_key) / _safe(version) / f"{key}.json"

    def where(self, agent_key: str, version: str, key: str) -> str:
        """Where the recording of `key` lives, for messages."""
        return str(self.path(agent_key, version, key))

    def load(self, agent_key: str, version: str, key: str) -> RunResult | None:
        path = self.path(agent_key, version, key)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise AgentError(f"recording {path} is unreadable: {exc}; delete it or re-record") from None
        return _run_of(doc, str(path))

    def save(
        self, agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest, *, replace: bool = True
    ) -> str:
        """Store a recording (`replace=False`: keep one that exists). Returns where it lives."""
        path = self.path(agent_key, version, key)
        if not replace and path.exists():
            return str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = _document(agent_key, version, key, result, request)
        with open_atomic(path, fsync=False) as fh:  # readers never see half a recording
            json.dump(doc, fh, ensure_ascii=False, indent=1)
        return str(path)


class S3RecordingStore(RecordingStore):
    """Recordings as objects `<prefix>/recordings/<agent key>/<version>/<hash>.json` in the store's bucket."""

    def __init__(self, settings: dict[str, Any]):
        from agent_health.backends.s3 import S3Bucket

        self.bucket = S3Bucket(settings, "store.settings")
        self.root = Path(self.bucket.key("recordings"))

    def _key(self, agent_key: str, version: str, key: str) -> str:
        return self.bucket.key("recordings", _safe(agent_key), _safe(version), f"{key}.json")

    def where(self, agent_key: str, version: str, key: str) -> str:
        return f"s3://{self.bucket.bucket}/{self._key(agent_key, version, key)}"

    def load(self, agent_key: str, version: str, key: str) -> RunResult | None:
        data = self.bucket.get(self._key(agent_key, version, key))
        if data is None:
            return None
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise AgentError(f"recording {self.where(agent_key, version, key)} is unreadable: {exc}") from None
        return _run_of(doc, self.where(agent_key, version, key))

    def save(
        self, agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest, *, replace: bool = True
    ) -> str:
        blob = json.dumps(_document(agent_key, version, key, result, request), ensure_ascii=False).encode()
        self.bucket.put(self._key(agent_key, version, key), blob, if_absent=not replace)
        return self.where(agent_key, version, key)


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
    """Recordings as documents (id = agent key, version and hash) in `<store index>-recordings`."""

    def __init__(self, settings: dict[str, Any]):
        from agent_health.backends.opensearch import OpenSearchIndex

        index = f"{settings.get('index', 'agent-health-results')}-recordings"
        self.index = OpenSearchIndex(settings, index, RECORDINGS_MAPPING, "store.settings")
        self.root = Path(index)

    def where(self, agent_key: str, version: str, key: str) -> str:
        return f"{self.index.location} document {self.index.doc_id(agent_key, version, key)}"

    def load(self, agent_key: str, version: str, key: str) -> RunResult | None:
        doc = self.index.get(self.index.doc_id(agent_key, version, key))
        return None if doc is None else _run_of(doc, self.where(agent_key, version, key))

    def save(
        self, agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest, *, replace: bool = True
    ) -> str:
        doc = _document(agent_key, version, key, result, request)
        self.index.put(self.index.doc_id(agent_key, version, key), doc, if_absent=not replace)
        return self.where(agent_key, version, key)


def open_recordings(store: StoreSettings | None, local_root: str | os.PathLike[str]) -> RecordingStore:
    """The recordings of a run: on the store's backend when the store is shared (an s3 or
    opensearch store, unless its `shared` setting is false), else files under `local_root`."""
    if store is not None and is_shared(store):
        if store.type == "s3":
            return S3RecordingStore(dict(store.settings))
        if store.type == "opensearch":
            return OpenSearchRecordingStore(dict(store.settings))
    return RecordingStore(local_root)


def _safe(part: str) -> str:
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


def _scrubbed(connector: Connector, result: RunResult) -> RunResult:
    scrub = getattr(connector, "scrub", None)  # real connectors know their secrets; demo has none
    return scrub_model(scrub(result) if scrub else result)
