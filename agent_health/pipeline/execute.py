"""Running exactly the partitions of one pipeline run through the one run path (every agent
version under one concurrency limit), each result stored the moment it finishes (a crashed run
keeps everything already written)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_health.analysis.metrics import GLANCE_METRICS
from agent_health.model import RunSettings, TestResult
from agent_health.pipeline.project import Project
from agent_health.pipeline.tables import ms, sig
from agent_health.reporters.base import CallbackReporter
from agent_health.session import build_settings, run_evaluation, run_loop
from agent_health.session.wiring import run_judge_settings
from agent_health.stores import ResultKey, ResultStore
from agent_health.stores.freshness import current_state, out_of_date

OnResult = Callable[[TestResult], None]


def missing_test_result(suite: str, test_id: str, agent: str, source_file: str, why: str) -> TestResult:
    """An errored result for a partition whose test no longer exists, so the partition is honest."""
    return TestResult(
        test_id=test_id,
        name=test_id.split("::", 1)[-1],
        suite=suite,
        source_file=source_file,
        agent=agent,
        status="errored",
        error=why,
    )


def reusable_results(
    store: ResultStore,
    project: Project,
    plan: Mapping[str, Sequence[Any]],
    settings: RunSettings,
    since: float,
) -> dict[str, list[TestResult]]:
    """Per agent version, the stored results of `plan`'s tests (LoadedTest) that a retry records
    instead of calling the agent again: stored at or after `since` (by the run being retried) and
    still current (the test's content hash, the agent version's settings and the judge settings
    they were produced from are today's). Reads summaries, then the reused results whole."""
    hashes = {t.id: t.case.content_hash for tests in plan.values() for t in tests}
    # the run's judge model counts: a result judged by another model is not reused
    current = current_state(project.config, hashes.items(), plan, run_judge_settings(project.config, settings.judge))
    out: dict[str, list[TestResult]] = {}
    for agent, tests in plan.items():
        keys = [ResultKey(agent, t.case.suite, t.id) for t in tests]
        fresh = [s for s in store.get_summaries(keys) if s.started_at >= since and s.content_hash == hashes[s.test_id]]
        stale = out_of_date(fresh, current)
        found = (store.get(ResultKey(agent, s.suite, s.test_id)) for s in fresh if s.test_id not in stale)
        out[agent] = [r for r in found if r is not None]
    return out


def run_partitions(
    project: Project,
    suite: str,
    test_ids_by_agent: Mapping[str, Sequence[str]],
    settings: RunSettings | None = None,
    on_result: OnResult | None = None,
    reuse_since: float | None = None,
) -> list[TestResult]:
    """Run the given tests of `suite` for each agent version and store every result. `settings`
    are the run's typed settings (None: the configuration's).

    `reuse_since` (a retry of a run that died, given the time that run started): a test whose
    result was stored since then and is still current is not run again; its stored result is
    returned (and passed to `on_result`) as if it had just finished, so the agent is called only
    for the rest. Test ids not in the suite's eval files any more get an errored result naming
    them. A suite that fails to load raises its EvalFileError (nothing is stored then)."""
    loaded = project.load_suite(suite)
    if loaded.errors and not loaded.tests:
        raise loaded.errors[0]
    by_id = {t.id: t for t in loaded.tests}
    source = project.suite_files().get(suite, suite)
    where = ", ".join(project.suite_sources().get(suite, (source,)))
    out: list[TestResult] = []
    for agent, ids in test_ids_by_agent.items():
        for tid in ids:
            if tid not in by_id:
                why = next((str(e) for e in loaded.errors if tid.split("::", 1)[-1] in str(e)), None)
                r = missing_test_result(
                    suite,
                    tid,
                    agent,
                    source,
                    why or f"test {tid!r} is not in {where} any more (removed or renamed); its partition is stale",
                )
                project.store.put(r)
                out.append(r)
                if on_result:
                    on_result(r)

    plan = {
        agent: [by_id[t] for t in ids if t in by_id]
        for agent, ids in test_ids_by_agent.items()
        if any(t in by_id for t in ids)
    }
    settings = settings or build_settings(project.config)

    def collect(result: TestResult) -> None:
        out.append(result)
        if on_result:
            on_result(result)

    if reuse_since is not None and plan:
        reused = reusable_results(project.store, project, plan, settings, reuse_since)
        for agent, results in reused.items():
            done = {r.test_id for r in results}
            plan[agent] = [t for t in plan[agent] if t.id not in done]
            for r in results:
                collect(r)
        plan = {agent: tests for agent, tests in plan.items() if tests}
    if plan:
        run_loop(  # as every transport runs the engine: test code cannot stop its loop
            run_evaluation(
                plan,
                project.config,
                settings,
                reporters=[CallbackReporter(collect)],
                store=project.store,
                transport="dagster",
            )
        )
    return out


def partition_metadata(result: TestResult) -> dict[str, Any]:
    """What each results partition shows: status, score, duration, tokens, cost (and the judges'
    part), judge verdicts, the files the agent produced, the derived
    metrics and insights that matter at a glance (a conversation's turns, how it ended, a simulated
    user's goal reached and turns to it), its provenance (harness version, agent settings
    hash, judges, and how many judgements when re-judged), and why it did not pass. A failed test's reason
    is under `failure`; an errored test's real error text under `error`."""
    metrics = result.metrics or {}
    meta: dict[str, Any] = {
        "status": result.status,
        "score": sig(float(result.score)) if result.score is not None else None,
        "duration_ms": ms(float(result.duration_ms)),
        "total_tokens": int(result.usage.total_tokens + result.judge_usage.total_tokens),
        "cost_usd": sig(float(result.cost_usd)) if result.cost_usd is not None else None,
        "judge_cost_usd": sig(float(result.judge_cost_usd)) if result.judge_cost_usd else None,
        "judge_verdicts": sum(s.kind == "judge" for s in result.signals) or None,
        # files the agent produced, by name and size (their copies stay on the stored result)
        "artifacts": ", ".join(f"{a.name} ({a.size} B)" for a in result.run.artifacts)[:500] or None
        if result.run is not None
        else None,
        **{name: metrics.get(name) for name in GLANCE_METRICS},
        "insights": len(result.insights),
        "insight_rules": ", ".join(sorted({i.rule for i in result.insights})) or None,
        "content_hash": result.content_hash[:16] or None,
        # provenance: what produced it (agent settings hash without secrets, the judges by identity)
        "harness_version": result.provenance.harness_version or None if result.provenance else None,
        "agent_settings_hash": result.provenance.agent_settings_hash or None if result.provenance else None,
        "judges": ", ".join(j.label for j in result.judges) or None,
        "judgements": len(result.judgements) + 1 if result.judgements else None,
    }
    if result.status == "failed":
        meta["failure"] = failure_reason(result)[:500]
    elif result.error:
        meta["error"] = result.error[:500]
    return {k: v for k, v in meta.items() if v is not None}


def failure_reason(result: TestResult) -> str:
    """Why a failed test failed: its failing gate signals, in body order (or its own message)."""
    failing = [s for s in result.signals if s.role == "gate" and s.passed is False and not s.skipped]
    parts = [f"{s.name}: {s.reasoning}" if s.reasoning else s.name for s in failing]
    return "; ".join(parts) or result.error or "a gate signal failed"
