"""The judge cache contract (`agent_health.judges.cache.JudgeCache`), run against each
implementation on real services: SQLite under the state folder, S3 (moto's server) and
OpenSearch (the session's node). See tests/stores/conftest.py for the fresh store per test."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent_health.config.secrets import REDACTED, register_secret
from agent_health.judges.cache import (
    JudgeCache,
    LocalJudgeCache,
    OpenSearchJudgeCache,
    S3JudgeCache,
    cache_key,
    open_judge_cache,
)
from agent_health.model import StoreSettings
from tests.stores.conftest import STORE_TYPES, new_store_settings
from tests.support.s3 import all_objects

IMPLEMENTATIONS = {"local": LocalJudgeCache, "s3": S3JudgeCache, "opensearch": OpenSearchJudgeCache}
VERDICT = {
    "passed": True,
    "score": 0.75,
    "reasoning": "names db-primary — «the» root cause ü 🚀",
    "details": {"cached_usage": {"total_tokens": 120}, "steps": [1, 2.5, None, "x"], "empty": {}},
}
UNUSUAL_KEYS = [
    "a/b",
    "a_b",
    "a%2Fb",
    "../../escape",
    ".",
    "..",
    "with space and\nnewline",
    "ключ ü 🚀",
    "sha256:" + "0" * 64,
    "=sha256-" + "1" * 64,
    "k" * 600,  # past OpenSearch's 512-byte ids and any file name
    "k" * 601,
]


@pytest.fixture(params=STORE_TYPES)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSettings:
    return new_store_settings(request.param, request, tmp_path)


@pytest.fixture
def open_cache(settings: StoreSettings, tmp_path: Path) -> Callable[[], JudgeCache]:
    """A new cache object on the same place each call (as a new process or machine would open it)."""
    local = tmp_path / "state" / "judge_cache.sqlite"
    opened: list[JudgeCache] = []

    def make() -> JudgeCache:
        cache = open_judge_cache(settings, local)
        opened.append(cache)
        return cache

    yield make
    for cache in opened:
        cache.close()


@pytest.fixture
def cache(open_cache: Callable[[], JudgeCache], settings: StoreSettings) -> JudgeCache:
    made = open_cache()
    assert type(made) is IMPLEMENTATIONS[settings.type]
    return made


def stored_bytes(cache: JudgeCache) -> bytes:
    """Everything the cache wrote, as one blob (SQLite's WAL included)."""
    if isinstance(cache, LocalJudgeCache):
        return b"".join(p.read_bytes() for p in sorted(cache.path.parent.iterdir()) if p.is_file())
    if isinstance(cache, S3JudgeCache):
        return b"".join(all_objects(cache.bucket.endpoint_url, cache.bucket.bucket).values())
    assert isinstance(cache, OpenSearchJudgeCache)
    url, index = cache.index.url, cache.index.index
    httpx.post(f"{url}/{index}/_refresh", timeout=30)
    return httpx.post(f"{url}/{index}/_search", json={"size": 10000}, timeout=30).content


def corrupt(cache: JudgeCache, key: str, how: str) -> None:
    """Leave an entry under `key` that is torn (not JSON) or foreign (JSON, not a verdict)."""
    if isinstance(cache, LocalJudgeCache):
        raw = "{torn" if how == "torn" else "[1, 2]"
        with sqlite3.connect(cache.path) as db:
            db.execute("INSERT OR REPLACE INTO judge_cache VALUES (?, 'verdict', ?, 0)", (key, raw))
    elif isinstance(cache, S3JudgeCache):
        raw = b"{torn" if how == "torn" else b'{"value": [1, 2]}'
        cache.bucket.put(cache._key(key), raw)
    else:
        assert isinstance(cache, OpenSearchJudgeCache)
        body = {"kind": "verdict"} if how == "torn" else {"kind": "verdict", "value": [1, 2]}
        cache.index.put(cache.index.doc_id(key), body)


def test_the_three_caches_are_siblings_implementing_one_interface():
    for impl in IMPLEMENTATIONS.values():
        assert issubclass(impl, JudgeCache) and impl.__bases__ == (JudgeCache,)
    with pytest.raises(TypeError):
        JudgeCache()  # type: ignore[abstract]


def test_put_then_get_round_trips_and_a_miss_is_none(cache):
    key = cache_key(criteria="names the root cause", model="openai:m")
    assert cache.get(key) is None and (cache.hits, cache.misses) == (0, 1)
    cache.put(key, "verdict", VERDICT)
    assert cache.get(key) == VERDICT and (cache.hits, cache.misses) == (1, 1)
    assert cache.get(cache_key(criteria="another")) is None and cache.misses == 2
    assert len(cache) == 1
    assert cache.location and "secret" not in cache.location


def test_the_first_readable_entry_of_a_key_stays(cache):
    cache.put("k1", "verdict", {"who": "first"})
    cache.put("k1", "verdict", {"who": "second"})  # an equal verdict arriving later changes nothing
    assert cache.get("k1") == {"who": "first"}
    assert len(cache) == 1


@pytest.mark.parametrize("how", ["torn", "foreign"])
def test_an_unreadable_entry_is_a_miss_and_the_next_put_replaces_it(cache, how):
    corrupt(cache, "k-bad", how)
    assert cache.get("k-bad") is None and cache.misses == 1
    cache.put("k-bad", "verdict", {"who": "healer"})
    assert cache.get("k-bad") == {"who": "healer"} and cache.hits == 1
    assert len(cache) == 1


def test_keys_with_unusual_characters_are_distinct_entries(cache, open_cache):
    for i, key in enumerate(UNUSUAL_KEYS):
        cache.put(key, "verdict", {"i": i})
    again = open_cache()
    assert [again.get(key) for key in UNUSUAL_KEYS] == [{"i": i} for i in range(len(UNUSUAL_KEYS))]
    assert len(again) == len(UNUSUAL_KEYS)
    for bad in ("", None):
        with pytest.raises(ValueError, match="judge cache key"):
            cache.put(bad, "verdict", {"i": 0})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="judge cache key"):
            cache.get(bad)  # type: ignore[arg-type]


def test_concurrent_writers_lose_no_entry_and_agree_on_shared_keys(open_cache):
    writers, own, shared = 6, 12, 4
    go = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(who: int) -> None:
        try:
            mine = open_cache()  # its own object, as another worker's
            go.wait()
            for i in range(own):
                mine.put(f"w{who}-{i}", "verdict", {"who": who, "i": i})
                if i < shared:
                    mine.put(f"shared-{i}", "verdict", {"who": who})
        except BaseException as exc:  # reported below, from the main thread  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    reader = open_cache()
    assert len(reader) == writers * own + shared
    for w in range(writers):
        assert [reader.get(f"w{w}-{i}") for i in range(own)] == [{"who": w, "i": i} for i in range(own)]
    winners = [reader.get(f"shared-{i}") for i in range(shared)]
    assert all(v is not None and v["who"] in range(writers) for v in winners)
    assert [open_cache().get(f"shared-{i}") for i in range(shared)] == winners  # every reader sees the same one


def test_entries_outlive_the_object_that_wrote_them(open_cache):
    first = open_cache()
    first.put("k-persist", "completion", {"text": "an answer", "model": "m"})
    first.close()
    second = open_cache()
    assert second.get("k-persist") == {"text": "an answer", "model": "m"} and second.hits == 1
    assert len(second) == 1


def test_known_secrets_are_never_stored(cache):
    secret = f"judge-cache-secret-{uuid.uuid4().hex}"  # fresh: only this test registers it
    register_secret(secret, setting="a test credential")
    cache.put("k-secret", "verdict", {"reasoning": f"the key is {secret}", "nested": [{"echo": secret}]})
    got = cache.get("k-secret")
    assert got == {"reasoning": f"the key is {REDACTED}", "nested": [{"echo": REDACTED}]}
    blob = stored_bytes(cache)
    assert b"the key is" in blob and secret.encode() not in blob
