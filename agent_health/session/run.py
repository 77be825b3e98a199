"""The one run path every transport calls: `run_evaluation` (async) and `run_tests` (blocking).

One call runs the selected tests for one or more agent versions under one concurrency limit,
stores every result the moment it finishes (tagged with the run's id, next to an `EvalRun`
manifest written at the start and rewritten at the end), and streams each result to any number
of reporters. Nothing keeps the results unless a reporter asks for them: what memory grows with is
the loaded tests themselves and, for agents writing to the local span store, its index
(docs/running.md, "Speed and memory"). The CLI and the Dagster pipeline are thin callers of this module.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agent_health.config import Config
from agent_health.engine import AgentEngine, Budget, EngineOptions, PlanOutcome, Running, Scopes, Watchdog, run_plan
from agent_health.engine.collector import frozen_heap
from agent_health.engine.runner import ArtifactAllowance
from agent_health.errors import ConfigError
from agent_health.judges.service import JudgeService
from agent_health.lazy import deferred
from agent_health.loader.types import LoadedTest
from agent_health.model import (
    EvalRun,
    RunReport,
    RunSettings,
    RunStatus,
    Shard,
    TestCase,
    TestResult,
    check_replay_mode,
    harness_version,
)
from agent_health.model.report import NotRunTest, SummaryTally
from agent_health.model.runs import this_process
from agent_health.offloop import use_daemon_threads
from agent_health.reporters.base import CallbackReporter, Reporter
from agent_health.session.control import RunControl
from agent_health.session.process import run_loop  # the one way the engine's loop is run
from agent_health.session.settings import build_settings, check_planned_work
from agent_health.session.sink import ResultSink
from agent_health.session.wiring import (
    build_analyzers,
    build_judges,
    build_runtime,
    check_budget_prices,
    gate_judges,
    run_judge_settings,
)
from agent_health.stores import ResultStore, open_store

# --only's freshness check reads stored results: loaded only with --only
if TYPE_CHECKING:
    import agent_health.session.only as only
else:
    only = deferred("agent_health.session.only")


Tests = Sequence[LoadedTest] | Mapping[str, Sequence[LoadedTest]]
T = TypeVar("T")

_CLOSE_S = 5.0  # closing connectors and judge clients never holds the process longer than this
_configured_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: its final manifest, and what could not be written."""

    run: EvalRun
    output_errors: tuple[str, ...] = ()  # a reporter or the store failed (the run went on)
    stored: int = 0  # results written to the store
    store: str | None = None  # the store's location, when there was one
    closed_outputs: tuple[str, ...] = ()  # stdout or stderr closed by its reader: reporting there ended

    @property
    def uncalibrated(self) -> tuple[str, ...]:
        """Warnings of the judges the calibration gate refused (demoted to observe, or errored)."""
        return tuple(w for w in self.run.warnings if w.startswith(CALIBRATION_WARNING))

    @property
    def all_passed(self) -> bool:
        """Every test that ran passed, every test ran, and no after_all hook failed."""
        return self.passed_but_budget and not any(self.run.not_run.values())

    @property
    def passed_but_budget(self) -> bool:
        """Every test that ran passed and no after_all hook failed; tests may have been left
        unrun only because the budget was reached (what `--budget-exit 0` lets exit 0)."""
        return (
            self.run.status == "finished"
            and not self.run.hook_errors
            and (not any(self.run.not_run.values()) or self.run.not_run_reason == "budget reached")
            and all(s.failed == 0 and s.errored == 0 for s in self.run.summaries)
        )

    @property
    def exit_ok(self) -> bool:
        """What the exit code says: every test passed, or the budget stopped a run that otherwise
        passed and the run's `budget.exit_code` is 0."""
        return self.all_passed or (self.run.settings.budget.exit_code == 0 and self.passed_but_budget)


CALIBRATION_WARNING = "judge "  # how a calibration gate's warning starts


def calibration_warnings(judges: JudgeService) -> list[str]:
    """One line per judge the calibration gate refused: what became of its verdicts and why."""
    fate = "its verdicts errored (--require-calibrated)" if judges.require_calibrated else "its verdicts only observe"
    refused = sorted(judges.uncalibrated.items())
    return [f"{CALIBRATION_WARNING}{who} is not calibrated: {why}; {fate}" for who, why in refused]


def artifact_warnings(allowance: ArtifactAllowance) -> list[str]:
    """The line saying how many artifact copies the run's cap left out, if any."""
    if not allowance.omitted:
        return []
    return [
        f"{allowance.omitted} artifact copy(ies) not stored: the run's artifact copies reached "
        f"{allowance.total:,} characters (ARTIFACTS_RUN_MAX, docs/limits.md); their names, sizes and hashes are kept"
    ]


def shard_tests(tests: Sequence[LoadedTest], shard: Shard | None) -> list[LoadedTest]:
    """The tests of `shard`: sorted by id, every `count`-th from the `index`-th (all without one).
    Sorting first makes the split independent of the order files were discovered in."""
    if shard is None:
        return list(tests)
    ordered = sorted(tests, key=lambda t: t.id)
    return ordered[shard.index - 1 :: shard.count]


def select_tests(tests: Sequence[LoadedTest], labels: Sequence[str] = (), grep: str | None = None) -> list[LoadedTest]:
    """Tests carrying every label whose name or id matches the regular expression `grep`."""
    try:
        rx = re.compile(grep, re.IGNORECASE) if grep else None
    except re.error as exc:
        raise ConfigError(f"grep {grep!r} is not a valid regular expression: {exc}") from None
    if not labels and rx is None:
        return list(tests)
    return [t for t in tests if _selected(t.case, labels, rx)]


def _selected(case: TestCase, labels: Sequence[str], rx: re.Pattern[str] | None) -> bool:
    return all(label in case.labels for label in labels) and (
        rx is None or rx.search(case.name) is not None or rx.search(case.id) is not None
    )


def _plan(tests: Tests, config: Config, settings: RunSettings) -> dict[str, list[LoadedTest]]:
    # the shard is taken of the whole selection, here only: the CLI passes the unsharded selection
    # keyed by KEY@VERSION, as results name their agent: `bench` and `bench@default` are one version
    if isinstance(tests, Mapping):
        return {
            config.agent_ref(agent): shard_tests(select_tests(ts, settings.labels, settings.grep), settings.shard)
            for agent, ts in tests.items()
        }
    selected = shard_tests(select_tests(tests, settings.labels, settings.grep), settings.shard)
    return {config.agent_ref(agent): selected for agent in settings.agents or (config.default_agent,)}


def plan_run(
    tests: Tests, config: Config, settings: RunSettings, store: ResultStore | None = None
) -> tuple[dict[str, list[LoadedTest]], dict[str, int], ResultStore | None]:
    """What a run of `tests` runs: agent version -> its tests (by labels, grep and, with
    `settings.only`, what the store says needs a run), agent version -> tests skipped as up to
    date, and the store (`store`, else the one `settings` name, opened when `only` reads it)."""
    plan = _plan(tests, config, settings)
    skipped: dict[str, int] = {}
    if settings.only:
        if store is None and settings.store is None:
            raise ConfigError(only.NO_STORE_FOR_ONLY.format(rules=" ".join(settings.only)))
        if store is None:
            store = open_store(config, settings.store)
        # the run's judge model counts: a result judged by another model is out of date
        judge = run_judge_settings(config, settings.judge)
        plan, skipped = only.tests_needing_a_run(plan, store, config, settings.only, judge)
    return plan, skipped, store


async def _close(closers: Sequence[Callable[[], Any]]) -> None:
    try:
        async with asyncio.timeout(_CLOSE_S):
            for close in closers:
                try:
                    await close()
                except Exception:  # closing a broken connection must not hide the run's outcome  # noqa: BLE001
                    pass
    except TimeoutError:
        pass


async def to_the_end(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` to its end even when the awaiting task is cancelled meanwhile, then re-raise
    that cancellation: what must not be left half done (the run's manifest and reports) is not."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # the work itself was cancelled, not just this wait
                raise
            cancelled = True
    value = task.result()
    if cancelled:
        raise asyncio.CancelledError
    return value


async def run_evaluation(
    tests: Tests,
    config: Config,
    settings: RunSettings | None = None,
    *,
    reporters: Sequence[Reporter] = (),
    store: ResultStore | None = None,
    transport: Literal["cli", "dagster", "api"] = "api",
    load_errors: Sequence[str] = (),
    on_error: Callable[[str], None] | None = None,
    on_stuck: Callable[[str], None] | None = None,
    judges: JudgeService | None = None,
    amend: Callable[[TestResult], TestResult] | None = None,
    rejudge_of: str | None = None,
    control: RunControl | None = None,
) -> RunOutcome:
    """Run `tests` (the same for every agent version of `settings.agents`, or a mapping agent
    version -> its tests); the outcome holds the run's final manifest.

    `settings` default to `build_settings(config)` (environment, then configuration). Results go
    to `store`, else to `open_store(config, settings.store)` (none when `settings.store` is None).
    With `settings.only`, each agent version runs only the tests that store says need a run
    (`agent_health.session.only`; a ConfigError when there is no store), and each summary counts
    the rest as `skipped`.
    Every agent version (and its secrets) and the judges are resolved before any test runs; a
    ConfigError then means nothing ran. `on_error` hears of a reporter or store that fails (the
    run goes on); `on_stuck` of a test that blocks the loop and cannot be interrupted (the CLI
    exits then). `judges` replaces the configured judge service (tests use it; it is closed at the
    end like the one built here). Re-judging passes `amend` (applied to each finished result before
    it is stored and reported; the run's counts are of the results as the engine made them) and
    `rejudge_of` (what it re-judges, for the manifest). `control` lets the process that owns the
    run stop it from a signal handler or another thread (`agent_health.session.control`).

    Once the tests are done or the run is cancelled, writing the manifest and finishing the reports
    is never cut short by a further cancellation: a report is complete or absent, never torn."""
    settings = settings or build_settings(config)
    plan, skipped, store = plan_run(tests, config, settings, store)
    check_planned_work(plan, settings)  # after --only: a resumed run plans only what is left
    agents = [config.agent(ref) for ref in plan]  # each agent version resolved once, for all below
    if judges is None:  # the run's judge model, skip and cache come from its typed settings
        judges = build_judges(config, settings.judge)
    if settings.budget.counts_cost:
        try:
            check_budget_prices(config, judges, agents)
        except BaseException:
            await judges.aclose()
            raise
    closers: list[Callable[[], Any]] = [judges.aclose]
    try:
        runtimes = []
        for resolved in agents:
            runtimes.append(build_runtime(config, resolved, settings.replay))
            closers.insert(0, runtimes[-1].aclose)
        if store is None and settings.store is not None:
            store = open_store(config, settings.store)
        gate_judges(judges, config, store, require=settings.judge.require_calibrated)
        analyzers = build_analyzers(config, judges)
    except BaseException:
        await _close(closers)
        raise

    loop = asyncio.get_running_loop()
    if loop not in _configured_loops:  # sync user code runs in daemon threads, never joined at exit
        use_daemon_threads(loop)
        _configured_loops.add(loop)
    started = time.time()
    run = EvalRun(
        transport=transport,
        started_at=started,
        harness_version=harness_version(),
        settings=settings,
        agents=tuple(plan),
        tests=max((len(ts) for ts in plan.values()), default=0),
        load_errors=tuple(load_errors),
        rejudge_of=rejudge_of,
        process=this_process(),  # where to look whether it still runs (EvalRun.as_seen)
        heartbeat_at=started,
    )
    sink = ResultSink(store, reporters, on_error)
    options = EngineOptions(
        timeout_s=settings.timeout_s,
        epochs=settings.epochs,
        skip_judge=settings.judge.skip,
        prices=dict(config.prices),
        eval_run_id=run.id,
    )
    scopes = Scopes([t for ts in plan.values() for t in ts], settings.timeout_s)
    planned = {agent: len(ts) for agent, ts in plan.items()}
    tallies = {agent: SummaryTally(agent) for agent in plan}
    collected: list[TestResult] | None = [] if any(r.keeps_results for r in reporters) else None
    done: set[str] = set()
    running: dict[int, Running] = {}  # tests in flight, for `abandon`
    # re-judging replays every agent run: only the judge calls spend
    budget = (
        Budget(settings.budget, options.prices, agents_spend=rejudge_of is None) if settings.budget.active else None
    )

    def documents(
        status: RunStatus,
        not_run: dict[str, int],
        hook_errors: list[str],
        unstarted: Sequence[tuple[str, LoadedTest]] = (),
        reason: str | None = None,
    ) -> tuple[EvalRun, RunReport]:
        """The final manifest and the report's summary part."""
        if reason is None and any(not_run.values()):
            reason = "interrupted"
        summaries = tuple(
            tallies[a].summary(not_run=not_run.get(a, 0), not_run_reason=reason, skipped=skipped.get(a, 0))
            for a in plan
        )
        spend = budget.spend() if budget is not None else None
        not_stored = sink.not_stored  # every result is stored or refused by now (the sink's calls wait)
        if status == "finished" and not_stored:
            status = "incomplete"
        final = run.model_copy(
            update={
                "status": status,
                "not_stored": not_stored,
                "finished_at": time.time(),
                "summaries": summaries,
                "not_run": not_run,
                "not_run_reason": reason,
                "budget": spend,
                "hook_errors": tuple(hook_errors),
                "warnings": tuple(calibration_warnings(judges) + artifact_warnings(options.artifacts)),
            }
        )
        report = RunReport(
            eval_run_id=run.id,
            started_at=run.started_at,
            finished_at=final.finished_at or time.time(),
            summaries=list(summaries),
            results=collected or [],
            load_errors=list(load_errors),
            hook_errors=list(hook_errors),
            not_run=sum(not_run.values()),
            skipped=sum(skipped.values()),
            not_run_reason=reason,
            not_run_tests=[
                NotRunTest(agent=a, test_id=t.case.id, name=t.case.name, suite=t.case.suite, reason=reason or "")
                for a, t in unstarted
            ],
            budget=spend,
            warnings=calibration_warnings(judges) + artifact_warnings(options.artifacts),
            shard=settings.shard,
        )
        return final, report

    def take(result: TestResult) -> TestResult:
        """Count a finished result; what goes to the store and the reporters."""
        tallies[result.agent].add(result)
        if amend is not None:
            result = amend(result)
        if collected is not None:
            collected.append(result)
        return result

    def abandon(reason: str, timeout_s: float) -> None:
        """From another thread, the loop stuck for good (see `RunControl.abandon`)."""
        deadline = time.monotonic() + timeout_s
        cut = list(running.values())
        running.clear()  # a cancellation the loop might still see reports nothing twice
        sink.put_blocking([take(r.unfinished(reason)) for r in cut])
        final, report = documents("interrupted", {a: planned[a] - tallies[a].total for a in plan}, list(scopes.errors))
        for agent in plan:
            if agent not in done:
                done.add(agent)
                sink.agent_done_blocking(agent, max(0.0, deadline - time.monotonic()))
        sink.finish_blocking(final, report, max(0.0, deadline - time.monotonic()))

    def stuck(message: str) -> None:  # the watchdog's thread; the loop is blocked for good
        abandon(f"the run was ended: {message}", _CLOSE_S)
        if on_stuck is not None:
            on_stuck(message)

    sink.start()
    try:  # the manifest first: a store that cannot take it stops the run before any test spends
        await sink.open(run)
    except BaseException:
        await sink.close()
        await _close(closers)
        raise
    watchdog = Watchdog(on_stuck=stuck if on_stuck is not None else None).start()
    pairs = [
        (AgentEngine(rt, judges, options, scopes, analyzers, watchdog), plan[agent])
        for agent, rt in zip(plan, runtimes)
    ]
    if control is not None:
        control.attach(abandon, watchdog)

    async def on_result(result: TestResult) -> None:
        result = take(result)
        await sink.put(result)
        if tallies[result.agent].total == planned[result.agent]:
            done.add(result.agent)
            await sink.agent_done(result.agent)

    def stop_reason() -> str | None:
        return control.reason if control is not None else None

    outcome = None
    planned_outcome = PlanOutcome()  # filled in by run_plan even when the run is cancelled
    try:
        await sink.begin(run, planned)
        with frozen_heap():  # the loaded tests and configuration: not walked by every collection
            outcome = await run_plan(
                pairs,
                scopes,
                on_result,
                concurrency=settings.concurrency,
                fail_fast=settings.fail_fast,
                running=running,
                stop_reason=stop_reason,
                budget=budget,
                outcome=planned_outcome,
            )
    finally:
        watchdog.stop()

        async def finish() -> RunOutcome:
            # Interrupted once a stop was asked for, even after the last test (the exit code says
            # so too); a stop asked for after this manifest is written changes nothing.
            status: RunStatus = "finished" if outcome is not None and stop_reason() is None else "interrupted"
            not_run = outcome.not_run if outcome else {a: planned[a] - tallies[a].total for a in plan}
            hook_errors = outcome.hook_errors if outcome else list(scopes.errors)
            for agent in plan:
                if agent not in done:
                    done.add(agent)
                    await sink.agent_done(agent)
            unstarted = planned_outcome.unstarted
            reason = planned_outcome.not_run_reason
            final, report = documents(status, not_run, hook_errors, unstarted, reason)
            await sink.finish(final, report)
            await sink.close()
            await _close(closers)
            ended = RunOutcome(
                final,
                tuple(sink.errors),
                sink.stored,
                store.location if store is not None else None,
                tuple(sink.closed),
            )
            if control is not None:
                control.outcome = ended
                control.detach()
            return ended

        ended = await to_the_end(finish())
    return ended


def run_tests(
    tests: Sequence[LoadedTest],
    config: Config,
    agent_ref: str | None = None,
    settings: RunSettings | None = None,
    on_result: Callable[[TestResult], None] | None = None,
    *,
    no_cache: bool = False,
    replay: str | None = None,
) -> list[TestResult]:
    """Blocking convenience over `run_evaluation` for one agent version: the results, in the order
    they finished. `settings` default to `build_settings(config)`; `agent_ref`, `no_cache` and
    `replay` override them. `on_result` is called with each result as it finishes."""
    if settings is not None and not isinstance(settings, RunSettings):
        raise TypeError(
            f"run_tests() takes RunSettings as its settings, not {type(settings).__name__} "
            "(EngineOptions is gone: RunSettings(concurrency=..., timeout_s=..., judge={'skip': True}))"
        )
    settings = settings or build_settings(config)
    updates: dict[str, Any] = {}
    if agent_ref:
        updates["agents"] = (agent_ref,)
    if no_cache:
        updates["judge"] = settings.judge.model_copy(update={"cache": False})
    if replay:
        updates["replay"] = check_replay_mode(replay, "replay")
    settings = settings.model_copy(update=updates)
    results: list[TestResult] = []

    def collect(result: TestResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    run_loop(run_evaluation(tests, config, settings, reporters=[CallbackReporter(collect)]))
    return results
