"""The local result store: a result of a run read through its suite's index from the run's log,
one stored without a run from its own file; atomic replace, exact listing; the index survives a
killed writer's torn line and is rewritten when mostly replaced lines, without losing a line a
concurrent writer appends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from agent_health import TestResult, load_config
from agent_health.stores import LocalResultStore, ResultKey, StoreError, default_store, local_index
from agent_health.stores.local_index import INDEX_NAME, compact, read_index
from tests.stores.results import make_result

from ..conftest import ROOT

RUN = "20261201T000000-cafe0002"


def result(test_id: str, agent: str = "demo@v1", status: str = "passed", **kw) -> TestResult:
    suite = test_id.split("::")[0]
    return TestResult(
        test_id=test_id, name=test_id, suite=suite, source_file=f"{suite}.eval.py", agent=agent, status=status, **kw
    )


def test_put_get_replace_and_delete(tmp_path):
    store = LocalResultStore(tmp_path / "results")
    key = store.put(result("rca/payments::db-outage", score=0.5))
    assert key == ResultKey("demo@v1", "rca/payments", "rca/payments::db-outage")
    assert store.get(key).score == 0.5
    store.put(result("rca/payments::db-outage", status="failed", score=0.0))  # a rerun replaces exactly it
    assert store.get(key).status == "failed"
    assert store.list() == [key]
    assert store.delete(key) is True and store.get(key) is None and store.delete(key) is False


def test_list_filters_by_agent_and_suite_and_ignores_temp_files(tmp_path):
    store = LocalResultStore(tmp_path)
    for agent in ("demo@v1", "demo@v2"):
        for tid in ("a::x", "a::y", "b/c-d::z"):
            store.put(result(tid, agent=agent))
    assert len(store.list()) == 6
    assert [k.test_id for k in store.list(agent="demo@v2", suite="a")] == ["a::x", "a::y"]
    assert [k.suite for k in store.list(suite="b/c-d")] == ["b/c-d", "b/c-d"]
    assert store.list(agent="nobody@v0") == []
    # a crashed writer leaves only a temp file behind; it is never listed as a result
    folder = store.path_for(ResultKey("demo@v1", "a", "a::x")).parent
    (folder / ".tmp-abc.json").write_text("{")
    assert len(store.list(agent="demo@v1", suite="a")) == 2
    assert [r.test_id for r in store.load(agent="demo@v1", suite="a")] == ["a::x", "a::y"]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    store = LocalResultStore(tmp_path)
    for i in range(20):
        store.put(result("s::t", score=i / 20))
    files = sorted(f for _, _, fs in os.walk(tmp_path) for f in fs)
    assert files == ["_index.jsonl", store.path_for(ResultKey("demo@v1", "s", "s::t")).name]
    assert json.loads(store.path_for(ResultKey("demo@v1", "s", "s::t")).read_text())["score"] == 0.95


def test_corrupt_file_is_a_clear_error(tmp_path):
    store = LocalResultStore(tmp_path)
    key = store.put(result("s::t"))
    store.path_for(key).write_text("not json")
    with pytest.raises(StoreError, match=r"s%3A%3At\.json is not a valid TestResult"):
        store.get(key)


def test_default_store_lives_under_the_state_dir(tmp_path):
    config = load_config(cwd=tmp_path)
    assert default_store(config).root == tmp_path.resolve() / ".agent_health" / "results"


def index_of(root, agent: str = "demo@v1", suite: str = "rca"):
    return root / agent / suite / INDEX_NAME


def test_results_of_a_run_live_in_its_log_and_the_index_points_at_them(tmp_path):
    store = LocalResultStore(tmp_path)
    store.put_many([make_result(f"rca::t{i}", eval_run_id=RUN, score=i / 10) for i in range(3)])
    store.put_many([make_result("rca::t1", eval_run_id=RUN, score=0.9)])  # replaced in the same run
    assert sorted(os.listdir(tmp_path / "demo@v1" / "rca")) == [INDEX_NAME]  # no file per result
    fresh = LocalResultStore(tmp_path)
    assert [(r.test_id, r.score) for r in fresh.get_many(fresh.list())] == [
        ("rca::t0", 0.0),
        ("rca::t1", 0.9),
        ("rca::t2", 0.2),
    ]
    assert [r.test_id for r in fresh.run_results(RUN)] == ["rca::t0", "rca::t2", "rca::t1"]


def test_the_newest_write_wins_whether_it_went_to_a_run_log_or_a_file(tmp_path):
    store = LocalResultStore(tmp_path)
    key = store.put(make_result("rca::t", eval_run_id=RUN, score=0.1))
    store.put(make_result("rca::t", score=0.2))  # without a run: its own file, and the index says so
    assert LocalResultStore(tmp_path).get(key).score == 0.2
    store.put(make_result("rca::t", eval_run_id=RUN, score=0.3))
    assert LocalResultStore(tmp_path).get(key).score == 0.3
    assert store.delete(key) is True  # the file and the index line both
    fresh = LocalResultStore(tmp_path)
    assert fresh.get(key) is None and fresh.list() == [] and fresh.delete(key) is False
    store.put(make_result("rca::t", eval_run_id=RUN, score=0.4))
    assert store.get(key).score == 0.4 and store.list() == [key]  # the reading store sees what was appended


def test_a_torn_index_line_of_a_killed_writer_is_skipped_and_the_lines_after_it_read(tmp_path):
    store = LocalResultStore(tmp_path)
    store.put_many([make_result(f"rca::t{i}", eval_run_id=RUN, score=0.1) for i in range(2)])
    with index_of(tmp_path).open("ab") as fh:
        fh.write(b'["rca::t0", "20261201T000000-cafe0002", 12')  # killed inside its write
    reader = LocalResultStore(tmp_path)
    assert [r.score for r in reader.get_many(reader.list())] == [0.1, 0.1]  # the torn line waits, unread
    LocalResultStore(tmp_path).put_many([make_result("rca::t0", eval_run_id=RUN, score=0.7)])
    assert [r.score for r in reader.get_many(reader.list())] == [0.7, 0.1]
    assert [r.score for r in LocalResultStore(tmp_path).get_many(reader.list())] == [0.7, 0.1]


def test_a_run_log_that_is_gone_is_a_clear_error(tmp_path):
    store = LocalResultStore(tmp_path)
    key = store.put(make_result("rca::t", eval_run_id=RUN))
    (tmp_path / "_runs" / RUN / "results.jsonl").unlink()
    where = r"the result of demo@v1 rca::t \(.*_runs/.*/results\.jsonl, byte 0\) cannot be read"
    with pytest.raises(StoreError, match=where):
        LocalResultStore(tmp_path).get(key)


def test_an_index_mostly_of_replaced_lines_is_rewritten_by_a_reader_and_a_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(local_index, "READER_COMPACT_BYTES", 2_000)
    monkeypatch.setattr(local_index, "WRITER_COMPACT_BYTES", 20_000)
    store = LocalResultStore(tmp_path)
    for round_ in range(30):
        store.put_many([make_result(f"rca::t{i}", eval_run_id=RUN, score=round_ / 100) for i in range(10)])
    index = index_of(tmp_path)
    assert index.stat().st_size < 20_000 * local_index.COMPACT_RATIO  # the writer rewrote it on the way
    store.put_many([make_result(f"rca::t{i}", eval_run_id=RUN, score=0.5) for i in range(10)])
    reader = LocalResultStore(tmp_path)
    assert [r.score for r in reader.get_many(reader.list())] == [0.5] * 10
    lines = index.read_bytes().splitlines()
    assert lines[0].startswith(b'{"index": 1') and len(lines) == 11  # the reader rewrote it: one line a test
    store.put_many([make_result("rca::t3", eval_run_id=RUN, score=0.6)])  # appended to the new file
    assert [r.score for r in reader.get_many(reader.list())] == [0.5] * 3 + [0.6] + [0.5] * 6


def test_a_view_of_an_index_rewritten_in_place_is_read_again(tmp_path):
    """A rewritten index can get the inode number of the file it replaced: a reader's cached view
    then sees the same inode and a larger size, and must not read the new file from the old size."""
    path = tmp_path / INDEX_NAME
    path.write_bytes(b'\n["a", "r1", 0, 10]\n')
    view = read_index(str(path), None)
    assert view is not None and view.pointers == {"a": ("r1", 0, 10)}
    with path.open("r+b") as fh:  # same inode, other content, larger
        fh.write(b'{"index": 1, "live": 40, "id": "x"}\n["b", "r2", 5, 7]\n')
    again = read_index(str(path), view)
    assert again is not None and again.pointers == {"b": ("r2", 5, 7)}


def test_a_rewrite_loses_no_line_a_writer_in_another_process_appends_meanwhile(tmp_path):
    """tests/engine/store_writer.py stores new tests batch after batch while this process rewrites
    the index again and again: every test of every batch the writer reported stored is listed
    and reads whole."""
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.store_writer", str(tmp_path), RUN, "2", "new", "small"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "0"
        index = str(index_of(tmp_path, suite="race"))
        rewrites = 0
        while writer.poll() is None:
            rewrites += compact(index)
            time.sleep(0.002)  # flock is not fair: back to back, the rewrites would starve the writer
        rounds = [0, *(int(line) for line in writer.stdout.read().split())]
        assert writer.wait() == 0
    finally:
        writer.kill()
        writer.wait()
    assert rewrites > 10 and len(rounds) > 10
    from tests.engine import store_writer

    reader = LocalResultStore(tmp_path)
    keys = reader.list(suite="race")
    assert len(keys) == len(rounds) * store_writer.KEYS
    assert sum(1 for _ in reader.get_many(keys)) == len(keys)


def test_any_test_id_and_run_id_survive_the_index(tmp_path):
    ids = ['rca::quote " and \\ backslash', "rca::Проверка 🚀", "rca::tab\tnew\nline"]
    run = 'run "with" quotes'
    LocalResultStore(tmp_path).put_many([make_result(t, eval_run_id=run) for t in ids])
    fresh = LocalResultStore(tmp_path)
    assert [k.test_id for k in fresh.list()] == sorted(ids)
    assert sorted(r.test_id for r in fresh.get_many(fresh.list())) == sorted(ids)
