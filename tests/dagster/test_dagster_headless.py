"""The headless main job: the whole pipeline through Dagster on a persistent local instance."""

from __future__ import annotations

import re

import pytest
from dagster import AssetKey, DagsterInstance

from definitions.headless import main

pytestmark = pytest.mark.filterwarnings("ignore")


def test_headless_runs_everything_and_says_how_to_open_the_ui(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # restored afterwards; main() points it at --dagster-home
    assert main(["--dagster-home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "3 suite(s)" in out and "rca/payments: 2 test(s) x 2 version(s)" in out
    assert "Leaderboard" in out and "| demo@v2 | * | 0.6 |" in out
    assert "### demo@v1 -> demo@v2" in out and "`cases::queue-backlog` | fixed" in out
    assert re.search(rf"DAGSTER_HOME={re.escape(str(home.resolve()))} \S*dagster dev -w workspace.yaml", out)
    with DagsterInstance.from_config(str(home)) as instance:  # the same assets, on the persistent instance
        rollup = instance.fetch_materializations(AssetKey(["rca", "payments", "rollup"]), limit=10).records
        assert {r.partition_key for r in rollup} == {"demo@v1", "demo@v2"}
        assert instance.get_latest_materialization_event(AssetKey(["benchmark", "comparison"])) is not None
        assert len(instance.get_runs()) == 3 + 2 + 1  # one run per suite, per rollup version, one benchmark


def test_headless_rejects_unknown_agent_versions(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["--dagster-home", str(tmp_path / "home"), "--agents", "demo@v1,demo@v9"]) == 2
    assert "unknown agent version(s) demo@v9; configured: demo@v1, demo@v2" in capsys.readouterr().err
