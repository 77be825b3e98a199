"""The local result store: one file per (agent, suite, test), atomic replace, exact listing."""

from __future__ import annotations

import json
import os

import pytest

from agent_health import TestResult, load_config
from agent_health.stores import LocalResultStore, ResultKey, StoreError, default_store


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
    files = [f for _, _, fs in os.walk(tmp_path) for f in fs]
    assert files == [store.path_for(ResultKey("demo@v1", "s", "s::t")).name]
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


def test_where_files_cannot_be_linked_in_they_are_renamed_into_place(tmp_path, monkeypatch):
    """A filesystem without unnamed files (no O_TMPFILE: unnamed_file declines) stores the same
    results through temporary files, and the store stops asking for that folder."""
    import agent_health.stores.local as local
    from tests.stores.results import make_result

    asked: list[str] = []

    def declines(folder_fd: int, data: bytes) -> None:
        asked.append(data.decode()[:1])
        return None

    monkeypatch.setattr(local, "unnamed_file", declines)
    store = LocalResultStore(tmp_path)
    run = "20261201T000000-cafe0002"
    for batch in range(2):
        store.put_many([make_result(f"rca::t{i}", eval_run_id=run, score=batch / 2) for i in range(3)])
    assert len(asked) == 1  # once for the folder, then never again
    keys = store.list()
    assert [r.score for r in store.get_many(keys)] == [0.5] * 3
    assert not [p for p in tmp_path.rglob("*.tmp")]
