"""Results are stored in batches (`put_many`), with the durability the local store promises: a
kill loses nothing reported stored, a reader never sees a torn result, a machine crash loses
nothing either (the run log and the suite index are fsynced per batch; a file of a store written
before the index that a crash left empty is rebuilt from the run log), and a store that fails for
some results stores the rest and counts them truly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_health import RunSettings, TestResult, define_config, load_tests, run_evaluation
from agent_health.reporters.base import CallbackReporter
from agent_health.session.sink import ResultSink
from agent_health.stores import LocalResultStore, ResultKey, StoreError
from tests.engine import store_writer
from tests.stores.results import make_result

from ..conftest import ROOT

RUN = "20261201T000000-cafe0001"


def count_fsyncs(monkeypatch) -> list[int]:
    """Count os.fsync calls (each still syncs)."""
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_put_many_syncs_once_per_batch_not_once_per_result(tmp_path, monkeypatch):
    store = LocalResultStore(tmp_path)
    store.put_many([make_result(f"rca::t{i:03d}", eval_run_id=RUN) for i in range(5)])  # creates the folders
    fsyncs = count_fsyncs(monkeypatch)
    keys = store.put_many([make_result(f"rca::t{i:03d}", eval_run_id=RUN, score=0.5) for i in range(100)])
    assert len(fsyncs) == 2  # the run log and the suite's index: no file per result
    assert [r.score for r in store.get_many(keys)] == [0.5] * 100
    assert sum(1 for _ in store.run_results(RUN)) == 100
    assert (tmp_path / "_runs" / RUN / "results.jsonl").read_bytes().count(b"\n") == 105

    assert not [f for f in os.listdir(tmp_path / "demo@v1" / "rca") if f.endswith(".json")]

    fsyncs.clear()  # a result without a run has no log to fall back on: its own file is synced
    store.put_many([make_result(f"rca::u{i}") for i in range(3)])
    assert len(fsyncs) == 3 + 2  # and the folder it was renamed in, and the index saying so


def test_a_store_written_before_the_index_reads_as_before_and_rebuilds_an_empty_file(tmp_path):
    """Before the suite index, every result had its own file, not fsynced one by one: a file a
    machine crash left empty (or torn) is rebuilt from the newest run log holding its result."""
    store = LocalResultStore(tmp_path)
    older, newer = "20261201T000000-aaaa0001", "20261201T000001-aaaa0002"
    store.put_many([make_result("rca::t1", eval_run_id=older, status="failed"), make_result("rca::t2")])
    store.put_many([make_result("rca::t1", eval_run_id=newer, status="passed")])
    key, other = ResultKey("demo@v1", "rca", "rca::t1"), ResultKey("demo@v1", "rca", "rca::t2")
    (tmp_path / "demo@v1" / "rca" / "_index.jsonl").unlink()  # the layout before the index:
    path = store.path_for(key)
    path.write_bytes(b"")  # t1's file renamed into place, its data never written: what a power loss left

    old = LocalResultStore(tmp_path)
    assert old.list() == [key, other]
    assert old.get(key).eval_run_id == newer
    assert TestResult.model_validate_json(path.read_bytes()).status == "passed"  # and put back
    path.write_bytes(b'{"test_id": "rca::t1", "na')
    (summary,) = LocalResultStore(tmp_path).get_summaries([key])
    assert summary.status == "passed"

    store.path_for(other).write_bytes(b"")  # stored without a run: no log
    with pytest.raises(StoreError, match=r"rca%3A%3At2\.json is not a valid TestResult"):
        LocalResultStore(tmp_path).get(other)

    third = "20261201T000002-aaaa0003"  # a new result of a test that has a file: the index wins
    old.put_many([make_result("rca::t1", eval_run_id=third, status="errored")])
    assert LocalResultStore(tmp_path).get(key).eval_run_id == third
    assert path.exists()  # the old file stays, and is no longer read


def start_writer(root: Path, seconds: float, *more: str) -> subprocess.Popen:
    """tests/engine/store_writer.py in a process of its own, rewriting results under `root`."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engine.store_writer", str(root), RUN, str(seconds), *more],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_concurrent_reader_never_sees_a_partial_result(tmp_path):
    """A reader in another process, reading while every result is rewritten batch after batch,
    reads each one whole (a torn read would fail validation), old or new."""
    writer = start_writer(tmp_path, 2.5)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "0"  # the first batch is in
        reader = LocalResultStore(tmp_path)
        reads, rounds = 0, set()
        while writer.poll() is None:
            keys = reader.list(suite="race")
            assert len(keys) == store_writer.KEYS
            for result in reader.get_many(keys):
                rounds.add(result.error.split(":", 1)[0])
                reads += 1
        assert writer.wait() == 0
    finally:
        writer.kill()
        writer.wait()
    assert reads > 100 and len(rounds) > 1  # it did read results while they were being replaced


def test_a_concurrent_reader_sees_new_results_whole_as_they_appear(tmp_path):
    """New tests appear in a reader's listing only once their batch's index lines are whole, and
    each one listed reads whole; the writer leaves no temporary file behind."""
    writer = start_writer(tmp_path, 2.5, "new")
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "0"
        reader = LocalResultStore(tmp_path)
        seen: set[str] = set()
        reads = 0
        while writer.poll() is None:
            new = [k for k in reader.list(suite="race") if k.test_id not in seen]
            for result in reader.get_many(new):
                assert int(result.error.split(":", 1)[0]) == int(result.test_id[len("race::r") :][:4])
                seen.add(result.test_id)
                reads += 1
        assert writer.wait() == 0
    finally:
        writer.kill()
        writer.wait()
    assert reads > 100  # it did read results as they appeared
    assert len(LocalResultStore(tmp_path).list(suite="race")) % store_writer.KEYS == 0  # whole batches
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_killed_writer_loses_nothing_it_reported_stored(tmp_path):
    writer = start_writer(tmp_path, 30)
    assert writer.stdout is not None
    for _ in range(3):
        last = int(writer.stdout.readline())
    time.sleep(0.05)  # somewhere inside a later batch
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    reported = max([last] + [int(line) for line in writer.stdout.read().split()])

    store = LocalResultStore(tmp_path)
    keys = store.list()
    assert len(keys) == store_writer.KEYS
    for result in store.get_many(keys):  # every file whole, from the last reported round or later
        assert int(result.error.split(":", 1)[0]) >= reported
    logged = {r.test_id: int(r.error.split(":", 1)[0]) for r in store.run_results(RUN)}
    assert len(logged) == store_writer.KEYS and min(logged.values()) >= reported


class CountingStore(LocalResultStore):
    """A local store that records the size of every batch it is given."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.batches: list[int] = []

    def put_many(self, results):
        results = list(results)
        self.batches.append(len(results))
        return super().put_many(results)


def suite_of(n: int) -> str:
    return "\n".join(
        [
            "from agent_health import test",
            f"for i in range({n}):",
            "    @test(f't{i:03d}')",
            "    def t():",
            "        pass",
        ]
    )


def run(tmp_path: Path, store: LocalResultStore) -> tuple[object, list[str], list[str]]:
    errors: list[str] = []
    reported: list[str] = []
    outcome = asyncio.run(
        run_evaluation(
            load_tests([tmp_path / "evals"]).tests,
            define_config(root=str(tmp_path)),
            RunSettings(concurrency=16),
            store=store,
            reporters=[CallbackReporter(lambda r: reported.append(r.test_id))],
            on_error=errors.append,
        )
    )
    return outcome, reported, errors


def test_the_run_stores_results_in_batches(write_eval, tmp_path):
    write_eval("many.eval.py", suite_of(300))
    store = CountingStore(tmp_path / "results")
    outcome, reported, errors = run(tmp_path, store)
    assert len(reported) == 300 and outcome.stored == 300 and not errors
    assert sum(store.batches) == 300 and len(store.batches) <= 300 / 4  # not one call per result
    assert len(list(store.run_results(outcome.run.id))) == 300


def test_a_store_failing_for_some_results_stores_the_rest_and_counts_them(write_eval, tmp_path):
    write_eval("good.eval.py", suite_of(150))
    write_eval("blocked.eval.py", suite_of(10))
    (tmp_path / "results" / "demo@v2").mkdir(parents=True)
    (tmp_path / "results" / "demo@v2" / "blocked").write_text("a file where a suite's folder should be")
    store = LocalResultStore(tmp_path / "results")
    outcome, reported, errors = run(tmp_path, store)
    assert len(reported) == 160  # every result still reported
    assert outcome.run.status == "incomplete" and outcome.run.not_stored == 10  # not "finished": 10 were lost
    assert outcome.stored == 150 and len(store.list(suite="good")) == 150
    assert len(errors) == 2, errors  # the first failure, and the count at the end
    assert "cannot write demo@v2 blocked::t" in errors[0] and "the run goes on without it" in errors[0]
    assert errors[1].endswith("10 results could not be stored")
    logged = {r.test_id for r in store.run_results(outcome.run.id)}
    assert len(logged) == 150 and not any(t.startswith("blocked") for t in logged)  # a result not stored is not logged


class HeldStore(LocalResultStore):
    """A local store whose writes wait until `go` is set (a slow store)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.go = threading.Event()

    def put_many(self, results):
        assert self.go.wait(30)
        return super().put_many(results)


def test_a_slow_store_slows_the_run_instead_of_filling_memory(tmp_path):
    """At most `max_pending` finished results wait for the store: the next one waits for a place,
    places come back as results are stored and reported, and every result ends stored."""
    store = HeldStore(tmp_path)
    reported: list[str] = []

    async def run() -> tuple[int, int]:
        sink = ResultSink(store, [CallbackReporter(lambda r: reported.append(r.test_id))], max_pending=5).start()
        accepted = 0

        async def produce() -> None:
            nonlocal accepted
            for i in range(40):
                await sink.put(make_result(f"rca::t{i:02d}", eval_run_id=RUN))
                accepted += 1

        producer = asyncio.ensure_future(produce())
        await asyncio.sleep(0.3)
        held = accepted  # the store has written nothing yet
        store.go.set()
        await asyncio.wait_for(producer, 30)
        await sink.close()
        return held, accepted

    held, accepted = asyncio.run(run())
    assert held == 5 and accepted == 40
    assert sorted(reported) == [f"rca::t{i:02d}" for i in range(40)] and len(store.list()) == 40


class ThreadNoting(LocalResultStore):
    """A local store that notes the thread of every write; `concurrent_writes` as given, and with
    two or more the first two writes wait for each other (they must be in flight at once)."""

    def __init__(self, root: Path, concurrent_writes: int):
        super().__init__(root)
        self.concurrent_writes = concurrent_writes  # type: ignore[misc]  # a class setting, set per test
        self.threads: list[str] = []
        self.together = threading.Barrier(2, timeout=10)

    def put_many(self, results):
        self.threads.append(threading.current_thread().name)
        if self.concurrent_writes >= 2 and len(self.threads) <= 2:
            self.together.wait()  # a BrokenBarrierError if the second write never starts meanwhile
        return super().put_many(results)


async def sink_run(store: ThreadNoting, n: int) -> tuple[ResultSink, list[str]]:
    """Put `n` results through a sink over `store`, in several hand-overs; the sink and the
    threads the reporter was called on."""
    reported: list[str] = []
    sink = ResultSink(store, [CallbackReporter(lambda r: reported.append(threading.current_thread().name))]).start()
    for i in range(n):
        await sink.put(make_result(f"rca::t{i:03d}", eval_run_id=RUN))
        if i % 50 == 49:
            await asyncio.sleep(0.02)  # what finished meanwhile is handed over
    await sink.close()
    return sink, reported


def test_a_local_store_is_written_on_the_sinks_own_thread(tmp_path):
    """No hand-off to a writer thread for a local disk (it cost more CPU than the write); the
    writes are still batched, and the reporters hear of a result only once it is stored."""
    store = ThreadNoting(tmp_path, LocalResultStore.concurrent_writes)
    sink, reported = asyncio.run(sink_run(store, 300))
    assert set(store.threads) == {"agent-health-results"} and set(reported) == {"agent-health-results"}
    assert sink.stored == 300 and len(reported) == 300 and len(store.list()) == 300
    assert 1 < len(store.threads) <= 300 / 4  # batched, in more than one write


def test_a_store_that_waits_on_a_network_keeps_two_writes_in_flight(tmp_path):
    store = ThreadNoting(tmp_path, 2)
    sink, reported = asyncio.run(sink_run(store, 300))
    assert not store.together.broken  # the first two writes were in flight at once
    assert all(t.startswith("agent-health-store") for t in store.threads) and set(reported) == {"agent-health-results"}
    assert sink.stored == 300 and len(reported) == 300 and len(store.list()) == 300


class Refusing(LocalResultStore):
    def put_many(self, results):
        raise StoreError("result store here: the disk is full")


def test_an_error_handler_that_raises_does_not_end_the_sinks_thread(tmp_path):
    """The store fails, and so does the callback told of it: every result is still reported, counted
    as not stored, and the sink still answers (its thread lives on)."""
    reported: list[str] = []

    def on_error(message: str) -> None:
        raise RuntimeError("the console went away")

    async def run() -> ResultSink:
        reporter = CallbackReporter(lambda r: reported.append(r.test_id))
        sink = ResultSink(Refusing(tmp_path), [reporter], on_error=on_error).start()
        for i in range(10):
            await sink.put(make_result(f"rca::t{i}", eval_run_id=RUN))
        await asyncio.wait_for(sink.call(lambda: None), 10)  # answered after every result was reported
        await sink.close()
        return sink

    sink = asyncio.run(run())
    assert len(reported) == 10 and sink.not_stored == 10 and sink.stored == 0
    assert sink.errors[0] == "result store here: the disk is full; the run goes on without it"
    assert "result sink: RuntimeError: the console went away" in sink.errors
