"""The recording store contract (`agent_health.replay.store.RecordingStore`), run against each
implementation on real services: files under the state folder, S3 (moto's server) and OpenSearch
(the session's node). See tests/stores/conftest.py for the fresh store per test."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import httpx
import pytest

from agent_health.config.secrets import REDACTED, register_secret
from agent_health.errors import AgentError
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest
from agent_health.replay.store import (
    LocalRecordingStore,
    OpenSearchRecordingStore,
    RecordingStore,
    S3RecordingStore,
    open_recordings,
    recording_key,
)
from tests.stores.conftest import STORE_TYPES, new_store_settings
from tests.support.s3 import all_objects

IMPLEMENTATIONS = {"local": LocalRecordingStore, "s3": S3RecordingStore, "opensearch": OpenSearchRecordingStore}
REQUEST = AgentRequest(prompt="Diagnose why the payment service is failing.", test_id="rca::payments")


def run(output: str, run_id: str = "run-1") -> RunResult:
    return RunResult(
        output=output,
        trajectory=(
            Step(kind="tool_call", tool="search_logs", args={"query": "payment ü"}, call_id="c1"),
            Step(kind="tool_result", tool="search_logs", content="Connection refused to db-primary", call_id="c1"),
        ),
        run_id=run_id,
        trace_id="ab" * 16,
        agent="rca@v1",
        prompt=REQUEST.prompt,
        duration_ms=321.5,
        usage=Usage(input_tokens=100, output_tokens=20, total_tokens=120, model="m"),
        raw_events=({"event": "done", "n": 1},),
    )


@pytest.fixture(params=STORE_TYPES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path):
    """A new store object on the same place each call (as another process or machine would open it)."""
    settings = new_store_settings(kind, request, tmp_path)
    root = tmp_path / "state" / "recordings"

    def make() -> RecordingStore:
        store = open_recordings(settings, root)
        assert type(store) is IMPLEMENTATIONS[kind]
        return store

    return make


@pytest.fixture
def store(open_store) -> RecordingStore:
    return open_store()


def stored_bytes(store: RecordingStore) -> bytes:
    """Everything the store wrote, as one blob."""
    if isinstance(store, LocalRecordingStore):
        return b"".join(p.read_bytes() for p in sorted(store.root.rglob("*")) if p.is_file())
    if isinstance(store, S3RecordingStore):
        return b"".join(all_objects(store.bucket.endpoint_url, store.bucket.bucket).values())
    assert isinstance(store, OpenSearchRecordingStore)
    url, index = store.index.url, store.index.index
    httpx.post(f"{url}/{index}/_refresh", timeout=30)
    return httpx.post(f"{url}/{index}/_search", json={"size": 10000}, timeout=30).content


def test_the_three_stores_are_siblings_implementing_one_interface():
    for impl in IMPLEMENTATIONS.values():
        assert issubclass(impl, RecordingStore) and impl.__bases__ == (RecordingStore,)
    with pytest.raises(TypeError):
        RecordingStore()  # type: ignore[abstract]


def test_save_then_load_round_trips_the_run_and_a_miss_is_none(store):
    key = recording_key("rca", "v1", REQUEST)
    assert store.load("rca", "v1", key) is None
    recorded = run("the payment service cannot reach db-primary")
    where = store.save("rca", "v1", key, recorded, REQUEST)
    assert where == store.where("rca", "v1", key) and store.location
    assert store.load("rca", "v1", key) == recorded
    assert store.load("rca", "v2", key) is None  # another version has its own recordings
    assert store.load("other", "v1", key) is None


def test_replace_overwrites_and_keep_first_keeps_the_recording(store):
    store.save("rca", "v1", "k1", run("first"), REQUEST, replace=False)
    store.save("rca", "v1", "k1", run("second"), REQUEST, replace=False)  # auto mode: the first stays
    assert store.load("rca", "v1", "k1").output == "first"
    store.save("rca", "v1", "k1", run("re-recorded"), REQUEST, replace=True)  # record mode: on purpose
    assert store.load("rca", "v1", "k1").output == "re-recorded"


def test_racing_keep_first_writers_all_replay_the_one_recording(open_store):
    """Workers recording the same run at once in auto mode: one recording wins, and every worker
    reads back that same one, before and after the others wrote."""
    writers = 6
    go = threading.Barrier(writers)
    seen: dict[int, str] = {}
    errors: list[BaseException] = []

    def write(who: int) -> None:
        try:
            mine = open_store()
            go.wait()
            mine.save("rca", "v1", "k-race", run(f"worker {who}"), REQUEST, replace=False)
            seen[who] = mine.load("rca", "v1", "k-race").output
        except BaseException as exc:  # reported below, from the main thread  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = open_store().load("rca", "v1", "k-race").output
    assert final in {f"worker {w}" for w in range(writers)}
    assert seen == dict.fromkeys(range(writers), final)


def test_unusual_key_parts_never_share_a_recording(store, open_store, tmp_path):
    parts = [
        ("team rca", "v1", "k"),
        ("team_rca", "v1", "k"),  # one folder name for both before
        ("rca", "1.0+b", "k"),
        ("rca", "1.0_b", "k"),
        ("rca", "v1", "../../escape"),
        ("rca", "v1", ".."),
        ("..", ".", "k"),
        ("ü:x", "v🚀", "ключ"),
        ("rca", "v1", "k" * 600),  # past file names' and OpenSearch ids' limits
        ("rca", "v1", "k" * 601),
    ]
    for i, (agent, version, key) in enumerate(parts):
        store.save(agent, version, key, run(f"recording {i}"), REQUEST)
    again = open_store()
    assert [again.load(*p).output for p in parts] == [f"recording {i}" for i in range(len(parts))]
    if isinstance(store, LocalRecordingStore):  # nothing was written outside the recordings folder
        outside = [p for p in tmp_path.rglob("*.json") if store.root not in p.parents]
        assert outside == []
    for bad in (("", "v1", "k"), ("rca", "", "k"), ("rca", "v1", "")):
        with pytest.raises(ValueError, match="recording (agent key|version|key)"):
            store.save(*bad, run("x"), REQUEST)
        with pytest.raises(ValueError, match="recording (agent key|version|key)"):
            store.load(*bad)


def test_recordings_outlive_the_object_that_wrote_them(open_store):
    open_store().save("rca", "v1", "k-persist", run("kept"), REQUEST)
    assert open_store().load("rca", "v1", "k-persist").output == "kept"


def test_known_secrets_are_never_stored(store):
    secret = f"recording-secret-{uuid.uuid4().hex}"  # fresh: only this test registers it
    register_secret(secret, setting="a test credential")
    leaky = run(f"the token is {secret}").model_copy(update={"raw_events": ({"authorization": secret},)})
    store.save("rca", "v1", "k-secret", leaky, REQUEST)  # straight to the store: no connector scrubbed it
    loaded = store.load("rca", "v1", "k-secret")
    assert loaded.output == f"the token is {REDACTED}" and secret not in json.dumps(loaded.raw_events)
    blob = stored_bytes(store)
    assert b"the token is" in blob and secret.encode() not in blob


def test_an_unreadable_recording_is_one_clear_error_naming_it(store):
    store.save("rca", "v1", "k-bad", run("fine"), REQUEST)
    if isinstance(store, LocalRecordingStore):
        store.path("rca", "v1", "k-bad").write_text("{torn")
    elif isinstance(store, S3RecordingStore):
        store.bucket.put(store._key("rca", "v1", "k-bad"), b"{torn")
    else:
        assert isinstance(store, OpenSearchRecordingStore)
        store.index.put(store.index.doc_id("rca", "v1", "k-bad"), {"format": 1, "key": "k-bad"})
    with pytest.raises(AgentError, match="recording .*k-bad.*(unreadable|not a valid run).*re-record"):
        store.load("rca", "v1", "k-bad")


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_recordings_under_the_earlier_folder_names_still_replay(store):
    """Earlier versions named an agent key's and a version's folder lossily ("team rca" ->
    "team_rca"); a recording made then is still found, and new ones go to the distinct names."""
    doc = {"format": 1, "key": "k-old", "agent": "team rca@1.0+b", "result": run("recorded before").model_dump()}
    if isinstance(store, LocalRecordingStore):
        old = store.root / "team_rca" / "1.0_b" / "k-old.json"
        old.parent.mkdir(parents=True)
        old.write_text(json.dumps(doc))
    else:
        assert isinstance(store, S3RecordingStore)
        store.bucket.put(store.bucket.key("recordings", "team_rca", "1.0_b", "k-old.json"), json.dumps(doc).encode())
    assert store.load("team rca", "1.0+b", "k-old").output == "recorded before"
    assert store.load("team_rca", "1.0_b", "k-old").output == "recorded before"  # the same folders then
    store.save("team rca", "1.0+b", "k-old", run("re-recorded"), REQUEST)
    assert store.load("team rca", "1.0+b", "k-old").output == "re-recorded"  # the new name comes first
    assert "team%20rca" in store.where("team rca", "1.0+b", "k-old")
