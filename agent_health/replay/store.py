"""Record and replay: re-run test bodies and re-judge without re-running the agent.

Modes: `off` (default: always run the agent), `record` (run and store), `auto` (replay when a
recording exists, else run and store), `strict` (replay; a missing recording is an error). A
recording is keyed by a hash of the agent key and version, prompt, context and provisioned inputs
(`provisioned`, `files`, `env`), and holds the full `RunResult` with the connector's secrets
removed. A replayed result has `replayed=True` and keeps the recorded run id and trace id, so
traces of the original run stay reachable.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent_health.config.secrets import scrub_model
from agent_health.connectors.base import Connector
from agent_health.errors import AgentError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.settings import check_replay_mode

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


class RecordingStore:
    """Recordings as JSON files: `<root>/<agent key>/<version>/<hash>.json`, written atomically."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path(self, agent_key: str, version: str, key: str) -> Path:
        return self.root / _safe(agent_key) / _safe(version) / f"{key}.json"

    def load(self, agent_key: str, version: str, key: str) -> RunResult | None:
        path = self.path(agent_key, version, key)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise AgentError(f"recording {path} is unreadable: {exc}; delete it or re-record") from None
        try:
            return RunResult.model_validate(doc["result"])
        except Exception as exc:
            raise AgentError(f"recording {path} is not a valid run: {exc}; delete it or re-record") from None

    def save(self, agent_key: str, version: str, key: str, result: RunResult, request: AgentRequest) -> Path:
        path = self.path(agent_key, version, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {
            "format": FORMAT,
            "key": key,
            "agent": f"{agent_key}@{version}",
            "test_id": request.test_id,
            "result": result.model_dump(mode="json"),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rec-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, ensure_ascii=False, indent=1)
        os.replace(tmp, path)  # readers never see half a recording
        return path


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
                    f"(replay mode strict; expected {self.store.path(agent.key, agent.version, key)}); "
                    "record it with --replay record or auto"
                )
        result = await self.inner.run(request)
        self.store.save(agent.key, agent.version, key, _scrubbed(self.inner, result), request)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


def _scrubbed(connector: Connector, result: RunResult) -> RunResult:
    scrub = getattr(connector, "scrub", None)  # real connectors know their secrets; demo has none
    return scrub_model(scrub(result) if scrub else result)
