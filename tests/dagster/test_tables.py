"""Readable numbers in the pipeline's tables."""

from __future__ import annotations

from agent_health.pipeline import ms, percent, sig


def test_numbers_are_rounded_for_reading():
    assert sig(0.33333333333333337) == 0.3333
    assert sig(-217.44117399987317) == -217.4
    assert sig(0.000659312) == 0.0006593
    assert sig(None) is None and sig(0.0) == 0.0
    assert percent(2 / 3) == 66.7 and percent(None) is None
    assert ms(12.3456) == 12.3 and str(ms(-0.04)) == "0.0"


BARE_AGENT = """
def run(request):  # tokens from a model no price table knows: its cost is unknown (None), not 0
    return {"output": "the payment-service cannot reach db-primary", "model": "in-house-llm-7",
            "usage": {"input_tokens": 120, "output_tokens": 30}}
"""


def test_a_python_agent_without_cost_or_tokens_beside_the_demo_agent_gives_empty_cells(
    make_pipeline, instance, project_dir, monkeypatch
):
    """Dagster's tables need every record to have the same fields: a row without a value (an agent
    that reports no cost) is an empty cell, and the leaderboard, rollups and comparison still
    materialize."""
    import sys

    from dagster import AssetKey

    from agent_health_dagster.defs.partitions import range_tags, version_range_tags
    from agent_health_dagster.headless import QUIET, register

    (project_dir / "bare_agent.py").write_text(BARE_AGENT)
    monkeypatch.syspath_prepend(str(project_dir))
    (project_dir / "agent_health_config.py").write_text(
        "from agent_health import AgentSpec, define_config\n"
        "config = define_config(agents=[\n"
        "    AgentSpec(key='demo', connector='demo', versions={'v1': {}}),\n"
        "    AgentSpec(key='bare', connector='python', settings={'function': 'bare_agent:run'}, versions={'v1': {}}),\n"
        "])\n"
    )
    sys.modules.pop("bare_agent", None)
    pipeline = make_pipeline()
    register(instance, pipeline)
    agents = ["demo@v1", "bare@v1"]
    for s in pipeline.suites:
        job = pipeline.defs.resolve_job_def(s.names.job)
        assert job.execute_in_process(
            instance=instance, tags=range_tags(agents, s.test_keys(instance)), run_config=QUIET
        ).success
    refresh = pipeline.defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, tags=version_range_tags(agents), run_config=QUIET, raise_on_error=False
    )
    assert refresh.success, [e.message for e in refresh.all_events if e.is_failure]
    board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"])).asset_materialization
    rows = [r.data for r in board.metadata["leaderboard"].records]
    columns = {c.name for c in board.metadata["leaderboard"].schema.columns}
    assert all(set(row) == columns for row in rows)  # every record has every field
    bare = [row for row in rows if row["agent"] == "bare@v1"]
    assert any(row["cost_usd"] is None for row in bare)  # an empty cell, not a crash
    assert any(row["total_tokens"] > 0 for row in bare)
    assert any(row["cost_usd"] for row in rows if row["agent"] == "demo@v1")
