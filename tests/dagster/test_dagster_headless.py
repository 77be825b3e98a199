"""The headless main job: the whole pipeline through Dagster on a persistent local instance."""

from __future__ import annotations

import re

import pytest
from dagster import AssetKey, DagsterInstance

from agent_health_dagster.headless import main

pytestmark = pytest.mark.filterwarnings("ignore")


def test_headless_runs_everything_and_says_how_to_open_the_ui(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # restored afterwards; main() points it at --dagster-home
    assert main(["--dagster-home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "3 suite(s)" in out and "rca/payments: 2 test(s) x 2 version(s)" in out
    assert "Leaderboard" in out and re.search(r"demo@v2 +current +\* +60\.0 ", out)
    assert "Comparison (demo@v2 against its baseline)" in out
    assert re.search(r"cases::queue-backlog +fixed +failed +passed", out)
    assert re.search(rf"DAGSTER_HOME={re.escape(str(home.resolve()))} bash \S*scripts/dev.sh", out)
    with DagsterInstance.from_config(str(home)) as instance:  # the same assets, on the persistent instance
        rollup = instance.fetch_materializations(AssetKey(["rca", "payments", "rollup"]), limit=10).records
        assert {r.partition_key for r in rollup} == {"demo@v1", "demo@v2"}
        comparison = instance.fetch_materializations(AssetKey(["benchmark", "comparison"]), limit=10).records
        assert {r.partition_key for r in comparison} == {"demo@v1", "demo@v2"}
        # one run per suite, per version its rollups and its comparison, one leaderboard
        assert len(instance.get_runs()) == 3 + 2 * 2 + 1
    assert "run_monitoring" in (home / "dagster.yaml").read_text()


def test_headless_rejects_unknown_agent_versions(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["--dagster-home", str(tmp_path / "home"), "--agents", "demo@v1,demo@v9"]) == 2
    assert "unknown agent version(s) demo@v9; configured: demo@v1, demo@v2" in capsys.readouterr().err
