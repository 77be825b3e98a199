"""The S3 store's summary log, against the session's moto server: a rollup's read lists and reads
a few log chunks instead of every result, and the log stays right when machines write the same
suite at once, when a writer dies half-way, when results are deleted, when chunks are compacted
under readers and writers, and for results stored before the log existed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agent_health.config import Config
from agent_health.errors import StoreError
from agent_health.model import StoreSettings
from agent_health.stores import ResultKey, ResultSummary, S3ResultStore, open_store
from agent_health.stores.s3_log import Write
from agent_health.stores.summary_log import Entry, current, parse_chunk
from tests.conftest import ROOT
from tests.stores.log_worker import AGENT, SUITE, all_keys
from tests.stores.results import make_result, suite_results


def open_s3(settings: StoreSettings, **extra: Any) -> S3ResultStore:
    """Another store on the same bucket: what another machine (or process) opens."""
    store = open_store(Config(root="."), StoreSettings(type="s3", settings={**settings.settings, **extra}))
    assert isinstance(store, S3ResultStore)
    return store


class Requests:
    """The GETs and listings one store sends."""

    def __init__(self, store: S3ResultStore):
        self.gets: list[str] = []
        self.lists: list[str] = []
        events = store.bucket.client.meta.events
        events.register("provide-client-params.s3.GetObject", lambda params, **kw: self.gets.append(params["Key"]))
        events.register(
            "provide-client-params.s3.ListObjectsV2", lambda params, **kw: self.lists.append(params["Prefix"])
        )

    def result_gets(self) -> list[str]:
        return [k for k in self.gets if "/results/" in k]

    def clear(self) -> None:
        self.gets.clear()
        self.lists.clear()


def chunks(store: S3ResultStore, agent: str = "demo@v1", suite: str = "rca") -> dict[str, str]:
    """Each log chunk of a suite and its kind."""
    out = {}
    for name, _ in store.bucket.list(store.log.folder(agent, suite)):
        if name.endswith(".jsonl"):
            found = store.bucket.read(name)
            assert found.data is not None
            out[name] = parse_chunk(name, found.data, found.modified).header.kind
    return out


def summaries_by_id(store: S3ResultStore, keys: list[ResultKey]) -> dict[str, ResultSummary]:
    return {s.test_id: s for s in store.get_summaries(keys)}


def truth(store: S3ResultStore, keys: list[ResultKey]) -> dict[str, ResultSummary]:
    """What the result objects themselves hold (one GET each)."""
    return {k.test_id: ResultSummary.of(r) for k in keys if (r := store.get(k)) is not None}


def next_second() -> None:
    """Sleep into the next whole second of the (local) server's clock, with a margin."""
    time.sleep(1.05 - time.time() % 1)


def test_a_first_read_after_a_backfill_reads_the_log_chunks_not_the_results(s3_settings):
    results = suite_results(200)
    writer = open_s3(s3_settings)
    writer.put_many(results[:120])
    writer.put_many(results[120:])
    reader = open_s3(s3_settings)  # another machine
    seen = Requests(reader)
    keys = [ResultKey.of(r) for r in results] + [ResultKey("demo@v1", "rca", "rca::absent")]
    assert list(reader.get_summaries(keys)) == [ResultSummary.of(r) for r in results]
    assert seen.result_gets() == []
    assert seen.lists == [reader.log.folder("demo@v1", "rca")] and len(seen.gets) == 2  # two chunks
    assert reader.list("demo@v1", "rca") == sorted(keys[:-1])

    other = open_s3(s3_settings)  # a third machine rewrites one result at once
    other.put(make_result("rca::t005", score=0.25, status="failed"))
    seen.clear()
    got = summaries_by_id(reader, keys)
    assert (got["rca::t005"].score, got["rca::t005"].status) == (0.25, "failed")
    # Written within a second of the first write by another machine, the log cannot order the two
    # by the server's clock: the reader reads that one result object, and only that one.
    assert set(seen.result_gets()) <= {reader.object_key(keys[5])}

    next_second()
    other.put(make_result("rca::t006", score=0.5))  # later: ordered by the server's clock alone
    seen.clear()
    got = summaries_by_id(open_s3(s3_settings, log_skew_s=0), keys)
    assert got["rca::t006"].score == 0.5 and got == truth(reader, keys)


def test_reads_after_a_later_rewrite_need_no_result_object(s3_settings):
    writer = open_s3(s3_settings, log_skew_s=0)
    results = suite_results(80)
    writer.put_many(results)
    next_second()
    open_s3(s3_settings).put_many([make_result(f"rca::t{i:03d}", score=0.75) for i in range(10)])
    reader = open_s3(s3_settings, log_skew_s=0)
    seen = Requests(reader)
    got = summaries_by_id(reader, [ResultKey.of(r) for r in results])
    assert [got[f"rca::t{i:03d}"].score for i in range(12)] == [0.75] * 10 + [results[10].score, results[11].score]
    assert seen.result_gets() == []


def test_puts_from_a_writers_threads_share_log_chunks_and_small_chunks_merge(s3_settings):
    store = open_s3(s3_settings)
    results = suite_results(160)
    seen_puts: list[str] = []
    store.bucket.client.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **kw: seen_puts.append(params["Key"])
    )
    with ThreadPoolExecutor(16) as pool:  # as the engine's result sink stores results
        assert len(list(pool.map(store.put, results))) == 160
    batches = sum(1 for k in seen_puts if k.endswith(".jsonl")) / 2  # pending, then committed
    assert batches < 80  # concurrent puts go in one batch (one chunk), not one chunk each
    assert len(chunks(store)) <= 25  # and a writer merges its small chunks 16 at a time

    sequential = open_s3(s3_settings)
    for i in range(40):  # one thread: one chunk per put, merged by 16
        sequential.put(make_result(f"rca::s{i:03d}", score=0.5))
    kinds = chunks(sequential)
    assert list(kinds.values()).count("merged") >= 2 and len(kinds) <= 25 + 10

    reader = open_s3(s3_settings)
    seen = Requests(reader)
    keys = [ResultKey.of(r) for r in results] + [ResultKey("demo@v1", "rca", f"rca::s{i:03d}") for i in range(40)]
    expected = {r.test_id: ResultSummary.of(r) for r in results}
    assert {k: v for k, v in summaries_by_id(reader, keys).items() if not k.startswith("rca::s")} == expected
    assert len(summaries_by_id(reader, keys)) == 200
    assert seen.result_gets() == []


def _worker(settings: StoreSettings, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.stores.log_worker", settings.model_dump_json(), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen, code: int = 0) -> None:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err[-3000:]
    if code == 0:
        assert out.strip() == "done", err[-3000:]


def test_machines_writing_deleting_reading_and_compacting_one_suite_at_once_agree_with_the_results(
    s3_settings, tmp_path: Path
):
    writers, count = 3, 24
    stop = tmp_path / "stop"
    compacting = StoreSettings(type="s3", settings={**s3_settings.settings, "log_compact_at": 2})
    procs = [_worker(s3_settings, "writer", str(w), str(count)) for w in range(writers)]
    readers = [_worker(compacting, "reader", str(writers), str(count), str(stop)) for _ in range(2)]
    for p in procs:
        _finish(p)
    stop.touch()
    for p in readers:
        _finish(p)
    fresh = open_s3(s3_settings)
    keys = all_keys(writers, count)
    expected = truth(fresh, keys)
    assert len(expected) > writers * count  # own keys all there, and some shared ones
    assert summaries_by_id(fresh, keys) == expected
    assert fresh.list(AGENT, SUITE) == sorted(ResultKey(AGENT, SUITE, t) for t in expected)
    assert "compact" in chunks(fresh, AGENT, SUITE).values()  # the readers compacted among the writers
    seen = Requests(fresh)
    assert summaries_by_id(open_s3(s3_settings, log_compact_at=1), keys) == expected  # compacted once more
    assert summaries_by_id(fresh, keys) == expected and len(chunks(fresh, AGENT, SUITE)) == 1
    assert seen.result_gets() == []


def _killed_writer(s3_settings, mode: str, test: str, score: str):
    """A stored suite of 80 whose `test` another process rewrites with `score` and dies (`mode`)."""
    store = open_s3(s3_settings)
    results = suite_results(80, suite=SUITE)
    store.put_many(results)
    key = ResultKey(AGENT, SUITE, f"{SUITE}::{test}")
    _finish(_worker(s3_settings, mode, key.test_id, score), code=9)
    return store, results, key


def test_a_writer_killed_after_writing_its_result_and_before_logging_it_loses_nothing(s3_settings):
    store, results, key = _killed_writer(s3_settings, "die-before-commit", "t007", "0.125")
    assert store.get(key).score == 0.125  # the result is stored; its log chunk is still pending
    assert "pending" in chunks(store, AGENT, SUITE).values()
    keys = [ResultKey.of(r) for r in results]

    reader = open_s3(s3_settings)
    seen = Requests(reader)
    assert summaries_by_id(reader, keys)[key.test_id].score == 0.125
    assert seen.result_gets() == [reader.object_key(key)]  # what the pending chunk named, only
    summaries_by_id(open_s3(s3_settings, log_compact_at=1), keys)  # compacts, but within the lease
    assert "pending" in chunks(store, AGENT, SUITE).values()  # its writer may still be writing

    late = open_s3(s3_settings, log_lease_s=0)  # once the lease is over, the writer is taken for dead
    assert summaries_by_id(late, keys) == truth(store, keys)
    assert "pending" not in chunks(store, AGENT, SUITE).values()  # folded into a compaction
    seen.clear()
    assert summaries_by_id(reader, keys)[key.test_id].score == 0.125 and seen.result_gets() == []


def test_a_writer_killed_before_writing_its_result_leaves_the_previous_one(s3_settings):
    store, results, key = _killed_writer(s3_settings, "die-before-result", "t008", "0.875")
    keys = [ResultKey.of(r) for r in results]
    assert summaries_by_id(open_s3(s3_settings), keys)[key.test_id] == ResultSummary.of(results[8])
    assert summaries_by_id(open_s3(s3_settings, log_lease_s=0), keys) == truth(store, keys)
    assert "pending" not in chunks(store, AGENT, SUITE).values()


def test_deleted_results_leave_the_log_and_stay_gone_through_merges_and_compactions(s3_settings):
    writer = open_s3(s3_settings)
    results = suite_results(70)
    for r in results:  # one put at a time: 4 merged chunks, then 6 small ones the writer still holds
        writer.put(r)
    gone = [ResultKey.of(r) for r in results[64:69]]
    deleter = open_s3(s3_settings)
    assert all(deleter.delete(k) for k in gone) and deleter.delete(gone[0]) is False
    keys = [ResultKey.of(r) for r in results]
    expected = {r.test_id: ResultSummary.of(r) for r in results if ResultKey.of(r) not in gone}
    assert summaries_by_id(open_s3(s3_settings, log_compact_at=1), keys) == expected  # compacted
    for i in range(10):  # the writer goes on: its next merge holds its old entries of the deleted tests
        writer.put(make_result(f"rca::n{i:03d}"))
    assert "merged" in chunks(writer).values()
    reader = open_s3(s3_settings)
    got = summaries_by_id(reader, keys)
    assert got == expected and not any(k in reader.list("demo@v1", "rca") for k in gone)
    writer.put(results[65])  # stored again after its delete
    assert summaries_by_id(reader, keys)[results[65].test_id] == ResultSummary.of(results[65])


def test_a_test_written_twice_in_one_batch_keeps_the_last_write(s3_settings):
    store = open_s3(s3_settings)
    results = suite_results(70)
    twice = [*results, results[3].model_copy(update={"score": 0.3}), results[3].model_copy(update={"score": 0.4})]
    puts: list[str] = []
    store.bucket.client.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **kw: puts.append(params["Key"])
    )
    store.put_many(twice)
    assert puts.count(store.object_key(ResultKey.of(results[3]))) == 1  # never two racing PUTs of one object
    assert store.get(ResultKey.of(results[3])).score == 0.4
    got = summaries_by_id(open_s3(s3_settings), [ResultKey.of(r) for r in results])
    assert got[results[3].test_id].score == 0.4 and len(got) == 70


def test_a_failed_result_write_fails_its_put_and_readers_read_that_object(s3_settings):
    store = open_s3(s3_settings)
    results = suite_results(70)
    store.put_many(results)
    broken = store.object_key(ResultKey.of(results[4]))
    real_write = store.bucket.write

    def write(key: str, data: bytes, **kw: Any):
        if key == broken:
            raise StoreError(f"cannot write {key}: SlowDown")
        return real_write(key, data, **kw)

    store.bucket.write = write  # type: ignore[method-assign]
    rewrite = [r.model_copy(update={"score": 0.5}) for r in results[:10]]
    with pytest.raises(StoreError, match="SlowDown"):
        store.put_many(rewrite)
    same = Write(results[4].test_id, ((broken, b"{}"),), None)
    errors = store.log.write("demo@v1", "rca", [same, same])  # a write replaced in its batch fails with it
    assert all(isinstance(e, StoreError) for e in errors) and len(errors) == 2
    reader = open_s3(s3_settings)
    seen = Requests(reader)
    got = summaries_by_id(reader, [ResultKey.of(r) for r in results])
    assert got[results[4].test_id] == ResultSummary.of(results[4])  # the object still holds the old one
    assert [got[r.test_id].score for r in rewrite if r.test_id != results[4].test_id] == [0.5] * 9
    assert seen.result_gets() == [broken]  # the log names the failed write, so a reader checks it


def test_a_chunk_compacted_away_under_a_reader_makes_it_list_again(s3_settings, caplog):
    writer = open_s3(s3_settings)
    results = suite_results(80)
    for r in results[:20]:
        writer.put(r)
    writer.put_many(results[20:])
    keys = [ResultKey.of(r) for r in results]
    reader = open_s3(s3_settings)
    seen = Requests(reader)
    compacted: list[bool] = []

    def compact_first(params: dict[str, Any], **kw: Any) -> None:
        if params["Key"].endswith(".jsonl") and not compacted:
            compacted.append(True)
            summaries_by_id(open_s3(s3_settings, log_compact_at=1), keys)  # another machine compacts now

    reader.bucket.client.meta.events.register("provide-client-params.s3.GetObject", compact_first)
    with caplog.at_level(logging.WARNING, logger="agent_health.stores"):
        assert list(reader.get_summaries(keys)) == [ResultSummary.of(r) for r in results]
    assert compacted and len(seen.lists) == 2 and seen.result_gets() == []  # listed again, read the compaction
    assert "summary log" not in caplog.text


def test_results_from_before_the_log_are_read_once_then_the_log_is_trusted(s3_settings):
    store = open_s3(s3_settings)
    results = suite_results(80)
    for r in results:  # as a store without the log wrote them
        store.bucket.put(store.object_key(ResultKey.of(r)), r.model_dump_json().encode())
    newer = make_result("rca::t200", score=0.5)
    store.put(newer)  # this version adds one: the suite had results, so no genesis yet
    keys = [ResultKey.of(r) for r in [*results, newer]]
    expected = [ResultSummary.of(r) for r in [*results, newer]]
    reader = open_s3(s3_settings)
    seen = Requests(reader)
    assert list(reader.get_summaries(keys)) == expected
    assert len(seen.result_gets()) == 80  # the results the log did not know, once each
    again = open_s3(s3_settings)
    seen = Requests(again)
    assert list(again.get_summaries(keys)) == expected and seen.result_gets() == []


def test_a_log_chunk_this_version_cannot_read_is_named_kept_and_read_around(s3_settings, caplog):
    store = open_s3(s3_settings)
    results = suite_results(70)
    store.put_many(results)
    foreign = store.log.folder("demo@v1", "rca") + "0000000000000-foreign-00000001.jsonl"
    store.bucket.put(foreign, b'{"format": 99, "kind": "compact"}\n')
    keys = [ResultKey.of(r) for r in results]
    with caplog.at_level(logging.WARNING, logger="agent_health.stores"):
        assert list(open_s3(s3_settings).get_summaries(keys)) == [ResultSummary.of(r) for r in results]
    assert foreign in caplog.text and "format 99" in caplog.text
    assert store.bucket.exists(foreign)  # never removed: it may be a newer version's


def test_invalid_log_settings_name_the_setting(s3_settings):
    from agent_health.errors import ConfigError

    with pytest.raises(ConfigError, match=r"store\.settings\.log_compact_at"):
        open_s3(s3_settings, log_compact_at=0)
    with pytest.raises(ConfigError, match=r"store\.settings\.log_lease_s"):
        open_s3(s3_settings, log_lease_s="soon")
    with pytest.raises(ConfigError, match=r"store\.settings\.log_compact_at: expected a whole number .* got 2\.5"):
        open_s3(s3_settings, log_compact_at=2.5)
    with pytest.raises(ConfigError, match=r"store\.settings\.log_skew_s: expected a number of at least 0"):
        open_s3(s3_settings, log_skew_s=-1)
    with pytest.raises(ConfigError, match=r"store\.settings\.read_concurrency: .* at least 1, got 0"):
        open_s3(s3_settings, read_concurrency=0)


# -- the ordering rule alone ------------------------------------------------------------------------
def _entry(etag: str | None, began: float, ended: float, writer: str | None = None, batch: int | None = None):
    return Entry("t", etag, None, began, ended, writer, batch)


def test_the_current_entry_is_the_one_written_after_every_other_finished():
    old, new = _entry('"a"', 100, 102), _entry('"b"', 103, 104)
    assert current([old, new], skew=1) is new and current([new, old], skew=1) is new
    assert current([old, new], skew=2) is None  # within the servers' clock skew: cannot tell
    assert current([old, _entry('"a"', 101, 103)], skew=1) is not None  # the same ETag never conflicts
    deleted = _entry(None, 105, 106)
    assert current([old, new, deleted], skew=1) is deleted
    assert current([new, _entry('"c"', 103, 104)], skew=0) is None  # overlapping writers: read the object


def test_one_writers_later_batch_wins_without_the_clock():
    first, second = _entry('"a"', 100, 101, "w1", 1), _entry('"b"', 100, 101, "w1", 2)
    assert current([second, first], skew=1) is second
    assert current([first, _entry('"b"', 100, 101, "w2", 2)], skew=1) is None  # another writer: no such rule
