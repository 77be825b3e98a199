"""Re-judging stored results: run the test bodies again with each stored agent run replayed (the
agent is never called), so expectations, judges and evaluators run again, optionally with another
judge model, through the one run path.

Each re-judged result keeps what it was judged before as history (`TestResult.judgements`, oldest
first); its own signals, status and score are the newest judgement. What belongs to the agent run
stays the stored run's: its timing, and in its provenance the agent settings hash and the
evaluation run that ran the agent. The re-judged results are stored as a new evaluation run whose
manifest names what it re-judged (`EvalRun.rejudge_of`). The CLI (`agent-health rejudge`) and the
Dagster rejudge job both call `rejudge_results`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_health.config import Config
from agent_health.judges.service import JudgeService
from agent_health.loader import LoadedTest, load_tests
from agent_health.model import Judgement, RunSettings, TestResult
from agent_health.replay.stored import StoredRuns, replaying
from agent_health.reporters.base import Reporter
from agent_health.session.process import run_loop
from agent_health.session.run import RunOutcome, run_evaluation, select_tests
from agent_health.session.settings import build_settings
from agent_health.stores import ResultStore, open_store

Key = tuple[str, str]  # (agent version, test id)


@dataclass(frozen=True)
class RejudgeOutcome:
    """How a re-judging run ended: the run's outcome (None when nothing could be re-judged) and
    every stored result left as it was, with why."""

    run: RunOutcome | None
    skipped: tuple[str, ...] = ()


def load_tests_for(results: Iterable[TestResult], config: Config) -> tuple[list[LoadedTest], list[str]]:
    """The tests of the eval files `results` came from, under the configured eval root; and one
    message per file that is gone or fails to load."""
    root = config.path(config.eval_root)
    files = sorted({r.source_file for r in results})
    present = [root / f for f in files if (root / f).is_file()]
    problems = [
        f"eval file {root / f} is gone: its results cannot be re-judged" for f in files if not (root / f).is_file()
    ]
    if not present:
        return [], problems
    loaded = load_tests(present, root=root)
    return loaded.tests, problems + [str(e) for e in loaded.errors]


def with_history(new: TestResult, old: TestResult) -> TestResult:
    """`new` (a re-judgement of `old`) with `old`'s judgements before it, and what belongs to the
    agent run kept from `old`: its timing and, in the provenance, the agent settings hash and the
    evaluation run that ran the agent."""
    updates: dict[str, object] = {
        "judgements": (*old.judgements, Judgement.of(old)),
        "started_at": old.started_at,
        "duration_ms": old.duration_ms,
    }
    if new.provenance is not None:
        before = old.provenance
        updates["provenance"] = new.provenance.model_copy(
            update={
                "agent_settings_hash": before.agent_settings_hash if before else "",
                "agent_eval_run_id": (before.agent_eval_run_id if before else None) or old.eval_run_id,
            }
        )
    return new.model_copy(update=updates)


def _epochs(test: LoadedTest, epochs: int) -> LoadedTest:
    """The test with as many trials as its stored result has (one replayed run each)."""
    if test.case.epochs == epochs:
        return test
    case = test.case.model_copy(update={"epochs": epochs})
    return LoadedTest(case, test.registry, test.body, test.run)  # a data case's test too: its case as given


async def rejudge_results(
    results: Iterable[TestResult],
    tests: Sequence[LoadedTest],
    config: Config,
    settings: RunSettings | None = None,
    *,
    source: str,
    store: ResultStore | None = None,
    reporters: Sequence[Reporter] = (),
    transport: Literal["cli", "dagster", "api"] = "api",
    on_error: Callable[[str], None] | None = None,
    judges: JudgeService | None = None,
) -> RejudgeOutcome:
    """Re-judge stored `results` (at most one per agent version and test) with the current bodies
    of `tests`, replaying each result's agent run(s). `settings` give the judge model, cache,
    concurrency, timeout and filters (default: `build_settings(config)` with the judge cache off,
    as the CLI: a cached verdict would only repeat the old one; the replay mode is not used).
    `source` names what is re-judged (a run id, an agent version, a store) for the new run's
    manifest. Results go to `store`, else to the configured one, and become the latest of their
    tests. Only results of tests that `settings.labels` / `settings.grep` select are re-judged;
    results whose test is gone, or that errored before any agent run, are skipped and said."""
    base = settings or build_settings(config, {"no_cache": True})
    by_id = {t.id: t for t in tests}
    selected = {t.id for t in select_tests(tests, base.labels, base.grep)} if base.labels or base.grep else None
    previous: dict[Key, TestResult] = {}
    skipped: list[str] = []
    plan: dict[str, list[LoadedTest]] = {}
    runs: dict[str, StoredRuns] = {}
    for r in results:
        test = by_id.get(r.test_id)
        if selected is not None and r.test_id not in selected:
            continue
        if test is None:
            skipped.append(f"{r.agent} {r.test_id}: the test is not in {r.source_file} any more")
        elif r.status == "errored" and r.run is None and not any(t.run for t in r.trials):
            skipped.append(f"{r.agent} {r.test_id}: it errored before the agent ran ({r.error}); nothing to re-judge")
        elif (r.agent, r.test_id) in previous:
            continue  # one judgement per test and agent version
        else:
            previous[(r.agent, r.test_id)] = r
            plan.setdefault(r.agent, []).append(_epochs(test, max(1, r.epochs)))
            runs.setdefault(r.agent, StoredRuns()).add(r)
    if not plan:
        return RejudgeOutcome(None, tuple(skipped))

    def merge(result: TestResult) -> TestResult:
        old = previous.get((result.agent, result.test_id))
        return with_history(result, old) if old is not None else result

    inner = base.model_copy(update={"agents": tuple(plan), "labels": (), "grep": None, "replay": "off"})
    if store is None and inner.store is not None:
        store = open_store(config, inner.store)
    with replaying(runs):
        outcome = await run_evaluation(
            plan,
            config,
            inner,
            reporters=reporters,
            store=store,
            transport=transport,
            on_error=on_error,
            judges=judges,
            amend=merge,
            rejudge_of=source,
        )
    return RejudgeOutcome(outcome, tuple(skipped))


def rejudge(
    results: Iterable[TestResult],
    config: Config,
    settings: RunSettings | None = None,
    *,
    source: str,
    tests: Sequence[LoadedTest] | None = None,
    store: ResultStore | None = None,
    reporters: Sequence[Reporter] = (),
    transport: Literal["cli", "dagster", "api"] = "api",
    on_error: Callable[[str], None] | None = None,
) -> RejudgeOutcome:
    """Blocking `rejudge_results`; the tests are loaded from the results' eval files when not given
    (a file that is gone or fails to load makes its results skipped, said in the outcome). A store
    or reporter that fails is told to `on_error` and kept in the outcome's `run.output_errors`."""
    results = list(results)
    problems: list[str] = []
    if tests is None:
        tests, problems = load_tests_for(results, config)
    coro = rejudge_results(
        results,
        tests,
        config,
        settings,
        source=source,
        store=store,
        reporters=reporters,
        transport=transport,
        on_error=on_error,
    )
    outcome = run_loop(coro)
    return dataclasses.replace(outcome, skipped=(*problems, *outcome.skipped))


__all__ = [
    "RejudgeOutcome",
    "load_tests_for",
    "rejudge",
    "rejudge_results",
    "with_history",
]
