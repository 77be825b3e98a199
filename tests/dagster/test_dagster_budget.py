"""A budget in an evaluation step's run config (docs/budgets.md): the step starts no test past it,
stores what ran, and says in its log how many tests were not run."""

from __future__ import annotations

from agent_health_dagster.headless import QUIET, register
from tests.dagster.test_dagster_pipeline import evaluate, suite_of


def test_a_budget_in_the_run_config_stops_the_step_and_its_log_says_so(make_pipeline, instance):
    pipeline = make_pipeline()
    register(instance, pipeline)
    s = suite_of(pipeline, "rca/payments")
    tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
    assert len(tests) > 1
    run = {"budget": {"max_tokens": 1}}  # the first test spends past it: no other test starts
    result = evaluate(
        pipeline, instance, "rca/payments", ["demo@v2"], run_config={**QUIET, "ops": {s.names.step: {"config": run}}}
    )
    runs = [r for r in pipeline.project.store.list_runs() if r.transport == "dagster"]
    [manifest] = runs
    assert manifest.not_run_reason == "budget reached" and manifest.not_run == {"demo@v2": len(tests) - 1}
    assert manifest.budget is not None and manifest.budget.reached == "max_tokens"
    assert len(list(pipeline.project.store.run_results(manifest.id))) == 1
    logs = [r.user_message for r in instance.all_logs(result.run_id) if r.level >= 30]  # warnings
    said = f"{len(tests) - 1} of {len(tests)} test(s) not run (the run's budget was reached)"
    assert any(said in m for m in logs), logs
