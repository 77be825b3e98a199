"""results_frame: stored results as a DataFrame, from every kind of source."""

from __future__ import annotations

import pandas as pd
import pytest

from agent_health import load_config, results_frame
from agent_health.analysis.frames import COLUMNS
from agent_health.errors import UsageError
from agent_health.stores import LocalResultStore
from tests.reports.helpers import epochs, result, store_run


@pytest.fixture
def store(tmp_path) -> LocalResultStore:
    s = LocalResultStore(tmp_path / ".agent_health" / "results")
    store_run(
        s,
        "20260103T000000-0000ccc1",
        [
            result("a", score=1.0, labels=("category:RCA",), cost_usd=0.002, duration_ms=120.0),
            result("b", "failed", score=0.25, labels=("category:RCA", "difficulty:Hard")),
            result("c", "errored", error="agent endpoint refused", suite="t"),
            result("a", agent="demo@v2", score=0.5, cost_usd=0.01),
            epochs("e", 2, 1, agent="demo@v2", suite="t"),
        ],
    )
    # a later run replaces one latest result; the first run keeps its own
    store_run(s, "20260103T000100-0000ccc2", [result("b", score=0.9)], started_at=5.0)
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    return s


def test_one_row_per_test_and_agent_version_with_the_latest_result(store):
    df = results_frame(store)
    assert list(df.columns) == list(COLUMNS) and len(df) == 5
    row = df[(df.agent == "demo@v1") & (df.test_id == "s::b")].iloc[0]
    assert (row.status, row.passed, row.score) == ("passed", True, 0.9)  # the later run's
    a = df[(df.agent == "demo@v1") & (df.test_id == "s::a")].iloc[0]
    assert a.labels == ["category:RCA"] and a.cost_usd == 0.002 and a.latency_ms == 120.0
    assert (a.agent_key, a.agent_version) == ("demo", "v1")
    errored = df[df.status == "errored"].iloc[0]
    assert errored.error == "agent endpoint refused" and pd.isna(errored.score)
    e = df[df.test_id == "t::e"].iloc[0]
    assert (e.epochs, e.pass_at_k, e.pass_hat_k, bool(e.flaky)) == (3, 1.0, 0.0, True)
    assert df.score.dtype == "float64" and df.total_tokens.dtype == "int64"


def test_filters_and_runs(store):
    assert set(results_frame(store, agents="demo@v2").test_id) == {"s::a", "t::e"}
    assert set(results_frame(store, suites=["t"]).test_id) == {"t::c", "t::e"}
    assert len(results_frame(store, agents=["demo@v1"], suites="s")) == 2
    first = results_frame(store, run="20260103T000000-0000ccc1")
    assert len(first) == 5 and first[first.test_id == "s::b"].iloc[0].status == "failed"
    with pytest.raises(UsageError, match="no run 'nope'"):
        results_frame(store, run="nope")


def test_sources_a_config_a_folder_a_config_file_and_the_current_project(store, tmp_path, monkeypatch):
    config = load_config(cwd=tmp_path)
    for source in (config, store.root, str(store.root), tmp_path / "agent_health_config.py"):
        assert len(results_frame(source)) == 5
    monkeypatch.chdir(tmp_path)
    assert len(results_frame()) == 5
    with pytest.raises(UsageError, match="neither a result store folder nor a configuration file"):
        results_frame(tmp_path / "missing")


def test_an_empty_store_gives_an_empty_frame_with_every_column(tmp_path):
    df = results_frame(LocalResultStore(tmp_path / "none"))
    assert df.empty and list(df.columns) == list(COLUMNS)
