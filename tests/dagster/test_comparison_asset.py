"""The Dagster comparison asset shows the statistics `agent-health compare` computes, the same
values: both pass rates with their Wilson intervals, the McNemar p, the bootstrap interval of the
score delta and the noise-filtered regressions, over the same stored results (a temporary SQLite
instance, the demo agent's two versions, the CLI as a separate process)."""

from __future__ import annotations

import json
import warnings

import pytest
from dagster import AssetKey, instance_for_test

from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.headless import QUIET, register
from tests.conftest import run_cli
from tests.evalkit import write_config, write_evals

pytestmark = pytest.mark.filterwarnings("ignore")
PASS_RATE_FIELDS = (("", "estimate"), ("_low", "low"), ("_high", "high"))
warnings.filterwarnings("ignore", module="dagster")


def test_comparison_asset_metadata_agrees_with_compare_json(tmp_path):
    from agent_health.pipeline.benchmark import format_statistic
    from agent_health_dagster.defs.partitions import range_tags, version_range_tags

    write_evals(tmp_path)
    write_config(tmp_path)
    pipeline = build_pipeline(AgentHealthResource(config_path=str(tmp_path / "agent_health_config.py")))
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as instance:
        assert register(instance, pipeline) == []
        agents = list(instance.get_dynamic_partitions("agent_versions"))
        assert agents == ["demo@v1", "demo@v2"]
        for s in pipeline.suites:
            tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
            job = pipeline.defs.resolve_job_def(s.names.job)
            assert job.execute_in_process(instance=instance, tags=range_tags(agents, tests), run_config=QUIET).success
        refresh = pipeline.defs.resolve_job_def("refresh")
        assert refresh.execute_in_process(instance=instance, tags=version_range_tags(agents), run_config=QUIET).success
        records = instance.fetch_materializations(AssetKey(["benchmark", "comparison"]), limit=10).records
        meta = {
            k: v.value
            for k, v in next(r for r in records if r.partition_key == "demo@v2").asset_materialization.metadata.items()
        }
        shown = {r.data["statistic"]: r.data["value"] for r in meta["statistics"].records}

    p = run_cli("compare", "demo@v1", "demo@v2", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    cli = json.loads(p.stdout)
    stats = cli["stats"]
    expected = {}
    for side in ("baseline", "candidate"):
        rate = stats[f"{side}_pass_rate"]
        expected |= {f"stats/{side}_pass_rate{end}": rate[field] for end, field in PASS_RATE_FIELDS}
        expected[f"stats/{side}_graded"] = rate["graded"]
    expected |= {
        "stats/mcnemar_p": stats["mcnemar"]["p_value"],
        "stats/mcnemar_pairs": stats["mcnemar"]["pairs"],
        "stats/mcnemar_regressed": stats["mcnemar"]["regressed"],
        "stats/mcnemar_fixed": stats["mcnemar"]["fixed"],
        "stats/significant": stats["significant"],
        "stats/significant_regression": cli["significant_regression"],
        "stats/score_delta": stats["score_delta"]["estimate"],
        "stats/score_delta_low": stats["score_delta"]["low"],
        "stats/score_delta_high": stats["score_delta"]["high"],
        "stats/bootstrap_resamples": stats["score_delta"]["resamples"],
        "stats/alpha": stats["alpha"],
        "stats/regressed_tests": cli["regressed_tests"],
        "stats/noise_tests": [t["test_id"] for t in cli["tests"] if t["flip"] == "noise"],
    }
    # the same statistics, rounded the one way the pipeline rounds them
    assert shown == {k.removeprefix("stats/"): format_statistic(k, v) for k, v in expected.items()} | {
        k: v for k, v in shown.items() if f"stats/{k}" not in expected
    }
    assert set(shown) >= {k.removeprefix("stats/") for k in expected}
    # a real comparison, not an empty one: both sides graded, a bootstrap interval around the delta
    assert int(shown["baseline_graded"]) > 0 and int(shown["candidate_graded"]) > 0
    low, mid, high = (float(shown[f"score_delta{e}"]) for e in ("_low", "", "_high"))
    assert low <= mid <= high
    assert meta["regressed"] == len(cli["regressed_tests"]) and meta["baseline"] == "demo@v1"
    assert [r.data["test_id"] for r in meta["regressed_tests"].records] == cli["regressed_tests"]
