"""Running one test against one agent version: hooks, fixtures, the body, epochs, timeouts,
scoring and the analyzers. Every sync user callable runs in a worker thread; the watchdog fails a
test whose async code blocks the loop. `agent_health.engine.scheduler` runs many of these under
one concurrency limit; `agent_health.session` wires them from the configuration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import PydanticSerializationError

from agent_health.analysis.insights import with_insights
from agent_health.analysis.metrics import run_metrics
from agent_health.capabilities.agent import AgentFixture
from agent_health.capabilities.context import TestContext, TestInfo, reset_context, set_context
from agent_health.capabilities.expect import expect as expect_api
from agent_health.capabilities.judge import build_request, judge_all
from agent_health.capabilities.judge import judge as judge_api
from agent_health.config.secrets import scrub_model
from agent_health.connectors.base import AgentRuntime
from agent_health.engine import scoring
from agent_health.engine.fixtures import FixtureScope
from agent_health.engine.watchdog import LoopBlocked, Watchdog
from agent_health.errors import BodyStop, InfrastructureError
from agent_health.interrupts import Interrupted, describe, must_propagate, where
from agent_health.judges.service import JudgeService
from agent_health.loader.registry import Scope
from agent_health.loader.types import LoadedTest
from agent_health.model import (
    Artifact,
    JudgeIdentity,
    Provenance,
    RunResult,
    Signal,
    TestCase,
    TestResult,
    TrialResult,
    Usage,
    harness_version,
)
from agent_health.model.copies import built
from agent_health.model.encodable import encodable
from agent_health.model.limits import ARTIFACTS_RUN_MAX, cut_text
from agent_health.model.result import TRIALS_KEPT
from agent_health.model.run import text_over
from agent_health.offloop import call, is_async_callable, run_off_loop, start_eagerly
from agent_health.pricing import cost_of
from agent_health.spend import Tab, reset_tab, use_tab

# An analyzer gets a finished result and its run's traces view (None without traces).
Analyzer = Callable[[TestResult, Any], Any]


@dataclass
class EngineOptions:
    """How one agent version's tests run (the run function derives them from `RunSettings`)."""

    timeout_s: float = 120.0
    epochs: int = 1
    skip_judge: bool = False
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    eval_run_id: str | None = None  # the evaluation run every result belongs to
    artifacts: ArtifactAllowance = field(default_factory=lambda: ArtifactAllowance())  # shared by the run


class ArtifactAllowance:
    """The artifact copies a run may still store: ARTIFACTS_RUN_MAX characters over all its results
    (docs/limits.md). Each copy is stored in the result, the run log, and every report (JSON, HTML),
    and held in memory by each; past the cap a result keeps an artifact's name, media type, size
    and hash, and says why its copy is not there. Results take the allowance in the order they
    finish; the body of a test sees every copy its agent made."""

    def __init__(self, total: int | None = None):
        self.total = ARTIFACTS_RUN_MAX if total is None else total
        self.left = self.total
        self.omitted = 0  # copies not stored

    @property
    def note(self) -> str:
        return (
            f"copy not stored: the run's artifact copies reached {self.total:,} characters "
            "(ARTIFACTS_RUN_MAX, docs/limits.md); name, size and sha256 are kept"
        )

    def take(self, run: RunResult | None) -> RunResult | None:
        """`run` with the copies past the allowance left out (the same object when none is)."""
        if run is None:
            return run
        self.omitted += sum(1 for a in run.artifacts if a.omitted)  # left out as the agent's files were read
        if not any(a.content is not None for a in run.artifacts):
            return run
        kept: list[Artifact] = []
        left_out = 0
        for a in run.artifacts:
            if a.content is not None and len(a.content) > self.left:
                a = a.model_copy(update={"content": None, "encoding": None, "omitted": self.note})
                left_out += 1
            elif a.content is not None:
                self.left -= len(a.content)
            kept.append(a)
        self.omitted += left_out
        return run.model_copy(update={"artifacts": tuple(kept)}) if left_out else run


class _ScopeState:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.started = False
        self.ready = False  # its before_all hooks have finished: later tests need not take the lock
        self.error: str | None = None
        self.remaining = 0
        self.finished = False


class Scopes:
    """`before_all` / `after_all` bookkeeping shared by every agent version of a run: a scope's
    `before_all` hooks run before its first test, its `after_all` hooks after its last (or at the
    end of a run cut short), once per run. Hooks are bounded by `timeout_s`."""

    def __init__(self, tests: Sequence[LoadedTest], timeout_s: float):
        self.timeout_s = timeout_s
        self.errors: list[str] = []
        self._states: dict[Scope, _ScopeState] = {}
        for t in tests:
            for s in t.scope.chain():
                state = self._states.get(s)
                if state is None:  # not `setdefault(s, _ScopeState())`: a state (and its lock) made per test
                    state = self._states[s] = _ScopeState()
                state.remaining += 1

    def entered(self, test: LoadedTest) -> tuple[bool, str | None]:
        """`(True, enter's answer)` when every scope of the test has its `before_all` hooks done
        (every test of a scope but the first ones): no coroutine to run; `(False, None)` when
        `enter` must run them or wait for them."""
        for scope in test.scope.chain():
            state = self._states[scope]
            if not state.ready:
                return False, None
            if state.error:
                return True, state.error
        return True, None

    async def enter(self, test: LoadedTest) -> str | None:
        """Run the `before_all` hooks the test needs; the first error of its scopes, if any."""
        for scope in test.scope.chain():
            state = self._states[scope]
            if not state.ready:  # the lock is for the tests that meet the hooks unfinished
                async with state.lock:
                    if not state.started:
                        state.started = True
                        errors = await self._hooks(scope, "before_all")
                        state.error = errors[0] if errors else None
                        state.ready = True
            if state.error:
                return state.error
        return None

    def left(self, test: LoadedTest) -> list[tuple[Scope, _ScopeState]]:
        """The test is done in each of its scopes; the scopes whose `after_all` hooks are now due
        (the test was their last), innermost first, for `finish` (most tests: none, and no
        coroutine to run)."""
        due = []
        for scope in reversed(test.scope.chain()):
            state = self._states[scope]
            state.remaining -= 1
            if state.remaining == 0 and state.started and not state.finished:
                due.append((scope, state))
        return due

    async def finish(self, due: list[tuple[Scope, _ScopeState]]) -> None:
        """Run the `after_all` hooks `left` found due."""
        for scope, state in due:
            if not state.finished:
                await self._after_all(scope, state)

    async def close(self) -> None:
        """After a run cut short (fail-fast, interruption): `after_all` of every started scope."""
        for scope, state in reversed(list(self._states.items())):
            if state.started and not state.finished:
                await self._after_all(scope, state)

    async def _after_all(self, scope: Scope, state: _ScopeState) -> None:
        state.finished = True
        self.errors.extend(await self._hooks(scope, "after_all"))

    async def _hooks(self, scope: Scope, kind: str) -> list[str]:
        """Run a scope's hooks of one kind; their errors (`before_all` stops at the first)."""
        errors: list[str] = []
        hooks = scope.hooks[kind]
        label = f" ({scope.name or 'file'})" if kind == "after_all" else ""
        for hook in reversed(hooks) if kind == "after_all" else hooks:
            try:
                async with asyncio.timeout(self.timeout_s):
                    await call(hook)
            except TimeoutError:
                errors.append(f"{kind} hook {hook.__name__!r}{label} did not finish within {self.timeout_s:g}s")
            except BaseException as exc:  # sys.exit() in a hook fails its scope, not the run
                if must_propagate(exc):
                    raise
                errors.append(f"{kind} hook {hook.__name__!r}{label} failed: {describe(exc)}")
            if errors and kind == "before_all":
                break
        return errors


def _timeout_signal(reason: str, timeout: float, took: float) -> Signal:
    return Signal(
        kind="deterministic",
        role="gate",
        name="timeout",
        passed=False,
        score=0.0,
        reasoning=reason,
        evidence={"expected": {"max_s": timeout}, "actual": {"s": round(took, 3)}},
    )


class AgentEngine:
    """Runs tests against one agent version (its runtime, the run's judges and analyzers)."""

    def __init__(
        self,
        runtime: AgentRuntime | None,
        judges: JudgeService,
        options: EngineOptions,
        scopes: Scopes,
        analyzers: Sequence[Analyzer] | None = None,
        watchdog: Watchdog | None = None,
    ):
        self.runtime = runtime
        self.judges = judges
        self.options = options
        self.scopes = scopes
        self.watchdog = watchdog
        # offline insights are always on; transports may add analyzers (trace metrics, synthesizers)
        self._analysis = _group(list(analyzers) if analyzers is not None else [with_insights])

    @property
    def agent_ref(self) -> str:
        return self.runtime.ref if self.runtime else "none"

    async def run_test(self, test: LoadedTest, tab: Tab | None = None) -> TestResult:
        """One test, every epoch, analysed: always a result, never an exception. Its judge calls
        are held against `tab` (the run's budget gives one), else against the test's own cap."""
        started = time.time()
        case = test.case  # read once: a data case's is made on each read
        if tab is None and case.max_cost_usd is not None:
            tab = Tab(case.id, cap_usd=case.max_cost_usd, prices=self.options.prices)
        t0 = time.perf_counter()
        ready, setup_error = self.scopes.entered(test)
        if not ready:
            setup_error = await self.scopes.enter(test)
        epochs = max(1, case.epochs or self.options.epochs)
        timeout = case.timeout_s or self.options.timeout_s
        trials = _Trials(self.options.prices)
        views: dict[str, Any] = {}  # run id -> traces view of the last trial, for the analyzers
        for epoch in range(epochs):
            if epoch:  # a trial that never awaits (a quick agent) still lets the loop run between trials
                await asyncio.sleep(0)
            if setup_error:
                trials.add(TrialResult(epoch=epoch, status="errored", error=setup_error))
                continue
            views.clear()
            trials.add(await self._run_trial(test, case, epoch, timeout, views, trials.cost, tab))
        if due := self.scopes.left(test):
            await self.scopes.finish(due)
        traces = views.get(trials.last.run.run_id) if trials.last and trials.last.run else None
        result = self._result(test, case, trials, started, (time.perf_counter() - t0) * 1000, tab, traces is None)
        result = await self._analyse(result, traces, timeout)
        # no credential the process resolved leaves the engine (judge echoes too); a result holding
        # megabytes of agent text is scrubbed in a worker thread, piece by piece: on the loop it
        # stopped every other test, and the watchdog, for seconds
        kept = result.trials
        if text_over((result.run, *(t.run for t in kept)) if kept else (result.run,)):
            return await run_off_loop(_scrubbed, result, True)  # type: ignore[no-any-return]
        return _scrubbed(result)

    def unfinished(self, test: LoadedTest, started_at: float, reason: str) -> TestResult:
        """The result of a test the run ended before it finished (interrupted, or abandoned while
        the event loop was stuck): errored, with `reason` as its error."""
        elapsed_ms = max(0.0, time.time() - started_at) * 1000
        trials = _Trials(self.options.prices)
        trials.add(TrialResult(epoch=0, status="errored", error=f"did not finish: {reason}"))
        return self._result(test, test.case, trials, started_at, elapsed_ms)

    async def _analyse(self, result: TestResult, traces: Any, timeout: float) -> TestResult:
        # The analyses run under the timeout, armed only once one waits: the built-in ones finish
        # at once without traces, and a timer per test was about a tenth of their cost.
        deadline = asyncio.get_running_loop().time() + timeout
        done: list[TestResult] = [result]  # the result as far as the analyzers finished
        try:
            finished, rest = start_eagerly(self._analysis_steps(done, traces))
            if not finished:
                if self.watchdog is not None:
                    self.watchdog.expect(deadline)
                async with asyncio.timeout_at(deadline):
                    await rest
        except TimeoutError:
            if self.watchdog is not None:
                self.watchdog.abandoned()  # a sync analyzer may still be running
            result = done[-1]
            metrics = {**result.metrics, "analysis_error": f"analyzers did not finish within {timeout:g}s"}
            return result.model_copy(update={"metrics": metrics})
        return done[-1]

    async def _analysis_steps(self, done: list[TestResult], traces: Any) -> None:
        # Sync analyzers (derived metrics read traces and may wait for them) run together in one
        # worker thread; async ones (the insight synthesizer) run on the loop.
        for is_async, group in self._analysis:
            if is_async:
                for analyze in group:
                    done.append(await analyze(done[-1], traces))
            else:
                done.append(await run_off_loop(_apply, group, done[-1], traces))

    async def _run_trial(
        self,
        test: LoadedTest,
        case: TestCase,
        epoch: int,
        timeout: float,
        views: dict[str, Any],
        spent: float | None = 0.0,
        tab: Tab | None = None,
    ) -> TrialResult:
        # body, scope and fixtures are read from the loaded test: its `spec` is built on every read
        ctx = TestContext(
            case=case,
            info=TestInfo(case.id, case.name, case.suite, case.labels, case.prompt, self.agent_ref, epoch),
            runtime=self.runtime,
            judges=self.judges,
            skip_judge=bool(case.skip_judge) or self.options.skip_judge,
            loop=asyncio.get_running_loop(),
            cost_cap_usd=case.max_cost_usd,
            prices=self.options.prices,
            spent_before_usd=spent,
        )
        fixtures = FixtureScope(
            {"agent": AgentFixture(ctx), "expect": expect_api, "judge": judge_api, "test_info": ctx.info},
            {**test.registry.fixtures, **test.fixtures},
            case.name,
        )
        token = set_context(ctx)
        tab_token = use_tab(tab)  # the trial's judge calls are held against it (agent_health.spend)
        if tab is not None:
            tab.trial(starting=True)
        infra: list[str] = []
        deadline = ctx.loop.time() + timeout
        watch = self.watchdog.watch(case.id, timeout, deadline) if self.watchdog else None
        t0 = time.perf_counter()
        chain = test.scope.chain()
        try:
            work = self._setup_and_body(test, ctx, fixtures)
            if watch is not None:
                work = self.watchdog.guard(watch, work)  # type: ignore[union-attr]
            # The timeout is armed once the trial waits, with the deadline it had from the start: a
            # trial that never waits (an agent answering at once, a replay) cannot be cancelled by it
            # anyway, and a timer per trial (a handle, a heap push, a cancel) was 3% of such a test.
            finished, rest = start_eagerly(work)
            if not finished:
                async with asyncio.timeout_at(deadline) as scope:
                    if watch is not None:
                        watch.scope = scope
                    await rest
        except TimeoutError:
            if self.watchdog is not None:
                self.watchdog.abandoned()  # a sync body, fixture or agent call cannot be stopped: it may still run
            took = time.perf_counter() - t0
            reason = watch.message() if watch is not None and watch.blocked_s else None
            ctx.record(_timeout_signal(reason or f"test did not finish within {timeout:g}s", timeout, took))
        except LoopBlocked as exc:
            ctx.record(_timeout_signal(str(exc), timeout, time.perf_counter() - t0))
        except BodyStop:
            pass  # the failing signal is already recorded
        except AssertionError as exc:  # a plain `assert` in the body
            ctx.record(
                Signal(
                    kind="deterministic",
                    role="gate",
                    name="assert",
                    passed=False,
                    score=0.0,
                    reasoning=f"{where(exc)}{exc or 'assertion failed'}",
                )
            )
        except InfrastructureError as exc:
            infra.append(str(exc))
        except Interrupted as exc:  # a real SIGINT/SIGTERM while this test blocked the loop
            infra.append(f"{exc} while this test was running; the run stops")
        except BaseException as exc:  # sys.exit(), KeyboardInterrupt, ... raised by the test's own code
            if must_propagate(exc):
                raise
            infra.append(describe(exc))
        else:
            took = time.perf_counter() - t0
            if watch is not None and watch.blocked_s and took > timeout:  # blocked past it, then returned
                ctx.record(_timeout_signal(watch.message(), timeout, took))
        finally:
            if watch is not None:
                self.watchdog.unwatch(watch)  # type: ignore[union-attr]
            unawaited = ctx.unawaited_run()
            for pending in ctx.pending:
                pending.close()
            infra = ([unawaited] if unawaited else []) + infra
            # teardown gets a budget of its own, so a timed-out test still cleans up
            deadline = asyncio.get_running_loop().time() + timeout
            if self.watchdog is not None:
                self.watchdog.expect(deadline)  # the last resort waits past it too
            for scope_ in reversed(chain):
                for hook in reversed(scope_.hooks["after_each"]):
                    try:
                        async with asyncio.timeout_at(deadline):
                            await self._hook(hook, fixtures, "after_each")
                    except TimeoutError:
                        if self.watchdog is not None:
                            self.watchdog.abandoned()
                        infra.append(f"after_each hook {hook.__name__!r} did not finish within {timeout:g}s")
                    except BaseException as exc:
                        if must_propagate(exc):
                            raise
                        infra.append(
                            str(exc)
                            if isinstance(exc, InfrastructureError)
                            else f"after_each hook failed: {describe(exc)}"
                        )
            if fixtures.holds_teardowns:  # most tests have none: no coroutine to run
                infra.extend(await fixtures.teardown(deadline))
            ctx.close()
            reset_context(token)
            reset_tab(tab_token)
            if tab is not None:
                tab.trial(starting=False)
            views.update(ctx.trace_views)
        signals = tuple(ctx.signals)
        status, score, error = scoring.outcome_of(signals, "; ".join(infra) if infra else None)
        return built(  # the engine's own values: not validated again
            TrialResult,
            {
                "epoch": epoch,
                "status": status,
                "score": score,
                "signals": signals,
                "run": ctx.run,
                "error": cut_text(error) if error is not None else None,
                "duration_ms": (time.perf_counter() - t0) * 1000,
            },
        )

    async def _setup_and_body(self, test: LoadedTest, ctx: TestContext, fixtures: FixtureScope) -> None:
        for scope in test.scope.chain():
            for hook in scope.hooks["before_each"]:
                await self._hook(hook, fixtures, "before_each")
        # The usual test (a data test's body, an async body asking for built-in fixtures only, no
        # suite judges) runs without the coroutines that resolve fixtures (`kwargs_for`), call a
        # body (`offloop.call`, which sends a sync one to a worker thread) and run suite judges:
        # each was a frame made, started and finished for nothing.
        body = test.body
        kwargs = fixtures.made_kwargs(body)
        if kwargs is None:
            kwargs = await fixtures.kwargs_for(body)
        judged = bool(test.suite_judges)
        try:
            if is_async_callable(body):
                await body(**kwargs)
            else:
                await call(body, **kwargs)
            for pending in ctx.pending:
                if not pending.awaited:
                    await pending
        except BodyStop:  # a hard failure stopped the body: the run is still judged by its suite judges
            if judged:
                await self._suite_judges(test, ctx)
            raise
        if judged:
            await self._suite_judges(test, ctx)

    @staticmethod
    async def _suite_judges(test: LoadedTest, ctx: TestContext) -> None:
        """The judges of the test's file and describe blocks, on its run: one gate signal each."""
        judges = test.suite_judge_list()
        if not judges or ctx.run is None:  # nothing to judge: the body never ran the agent
            return
        await judge_all(ctx, [build_request(ctx, ctx.run, j, gate=True) for j in judges])

    async def _hook(self, hook: Callable[..., Any], fixtures: FixtureScope, kind: str) -> None:
        try:
            await call(hook, **await fixtures.kwargs_for(hook))
        except (BodyStop, InfrastructureError):
            raise
        except BaseException as exc:
            if must_propagate(exc):
                raise
            raise InfrastructureError(f"{kind} hook {hook.__name__!r} failed: {describe(exc)}") from exc

    def _result(
        self,
        test: LoadedTest,
        case: TestCase,
        trials: _Trials,
        started: float,
        duration_ms: float,
        tab: Tab | None = None,
        untraced: bool = False,
    ) -> TestResult:
        last = trials.last
        assert last is not None
        prices = self.options.prices
        # Every value below is the engine's own, already of its field's type: the result and its
        # provenance are built without a validation (`built`), their one text cut to its limit here.
        fields: dict[str, Any] = {
            "test_id": case.id,
            "name": case.name,
            "suite": case.suite,
            "source_file": case.source_file,
            "line": case.line,
            "labels": case.labels,
            "content_hash": case.content_hash,
            "agent": self.agent_ref,
            "status": last.status,
            "score": last.score,
            "signals": last.signals,
            "run": last.run,
            "run_id": last.run.run_id if last.run else None,
            "error": last.error,
            "evaluation_type": scoring.evaluation_type_of(trials.kinds),
            "started_at": started,
            "duration_ms": duration_ms,
            "usage": trials.usage,
            "judge_usage": trials.judge_usage,
            "cost_usd": round(trials.cost, 8) if trials.cost is not None else None,
            "judge_cost_usd": round(trials.judge_cost, 8) if trials.judge_cost is not None else None,
            "epochs": trials.tally.count,
            "metrics": run_metrics(last.run, prices, untraced=untraced),
            "eval_run_id": self.options.eval_run_id,
            "provenance": built(
                Provenance,
                {
                    "harness_version": harness_version(),
                    "eval_file": case.source_file,
                    "content_hash": case.content_hash,
                    "agent_settings_hash": self.runtime.settings_hash if self.runtime else "",
                    "judge_settings_hash": self.judges.settings_hash,
                    # a replayed run was made by whichever run recorded it
                    "agent_eval_run_id": (
                        self.options.eval_run_id if trials.last_run and not trials.last_run.replayed else None
                    ),
                    "judged_at": time.time(),
                    "uncalibrated_judges": uncalibrated_judges(last.signals),
                    "calibrated_judges": calibrated_judges(last.signals),
                },
            ),
        }
        taken: dict[int, RunResult | None] = {}  # each run once, wherever the result holds it

        def stored(run: RunResult | None) -> RunResult | None:
            if id(run) not in taken:
                taken[id(run)] = self.options.artifacts.take(run)
            return taken[id(run)]

        fields["run"] = stored(last.run)
        if trials.tally.count > 1:
            kept = tuple(t if t.run is None else t.model_copy(update={"run": stored(t.run)}) for t in trials.kept)
            fields.update(trials.tally.combined(), trials=kept, trial_counts=dict(trials.tally.counts))
            status = fields["status"]
            fields["error"] = trials.tally.first_error.get(status, last.error) if status != "passed" else None
        if (over := _over_cap(case.max_cost_usd, trials)) is not None:
            fields.update(status="errored", score=None, error=over)
        elif (
            tab is not None
            and tab.refused is not None
            and not tab.refused.budget
            # a simulated user's refused call already errored the test saying so
            and not (last.status == "errored" and str(tab.refused) in (last.error or ""))
        ):
            # its cap refused a judge call before it was made: errored, naming the estimate and the cap
            fields.update(status="errored", score=None, error=f"not judged: {tab.refused}")
        if fields["error"] is not None:
            fields["error"] = cut_text(fields["error"])
        return built(TestResult, fields)


def uncalibrated_judges(signals: Iterable[Signal]) -> tuple[str, ...]:
    """'<judge>: <why>' of each judge whose verdicts the calibration gate refused, each once."""
    out: dict[str, None] = {}
    for s in signals:
        evidence = s.evidence or {}
        why = evidence.get("calibration") if s.kind == "judge" else None
        if why:
            raw = evidence.get("provenance")
            who = JudgeIdentity.model_validate(raw).label if isinstance(raw, dict) else str(evidence.get("evaluator"))
            out[f"{who}: {why}"] = None
    return tuple(out)


def calibrated_judges(signals: Iterable[Signal]) -> tuple[str, ...]:
    """The judges whose gating verdicts the calibration gate let gate, each once."""
    out: dict[str, None] = {}
    for s in signals:
        evidence = s.evidence or {}
        if s.kind == "judge" and evidence.get("calibrated") and isinstance(raw := evidence.get("provenance"), dict):
            out[JudgeIdentity.model_validate(raw).label] = None
    return tuple(out)


_NO_USAGE = Usage()  # frozen: one object for every test's starting sums


class _Trials:
    """The trials of one test, folded as they finish: usage, cost, signal kinds, counts and the
    combined status are running sums, and only the first `TRIALS_KEPT` trials (and the last) are
    kept, so memory stays flat in the number of epochs."""

    def __init__(self, prices: dict[str, tuple[float, float]]):
        self.prices = prices
        self.tally = scoring.TrialTally()
        self.kept: list[TrialResult] = []
        self.last: TrialResult | None = None
        self.last_run: RunResult | None = None
        self.usage = _NO_USAGE
        self.judge_usage = _NO_USAGE
        self.cost: float | None = 0.0  # each agent run and judge call priced at its own model
        self.judge_cost: float | None = 0.0  # the judge calls' part of it
        self.kinds: set[str] = set()

    def add(self, trial: TrialResult) -> None:
        self.tally.add(trial)
        self.last = trial
        if trial.run is not None:
            self.last_run = trial.run
            # nothing plus a usage is that usage (the first trial's, the one trial of most tests)
            self.usage = trial.run.usage if self.usage is _NO_USAGE else self.usage + trial.run.usage
            self._price(trial.run.usage)
            conversation = trial.run.conversation
            if conversation is not None and conversation.user_calls:
                self._judge_side(conversation.user_usage)  # the simulated user's model calls count as the judges'
        for s in trial.signals:
            if not s.skipped:
                self.kinds.add(s.kind)
            if s.kind == "judge" and s.evidence and "usage" in s.evidence:
                self._judge_side(Usage(**s.evidence["usage"]))
        if len(self.kept) < TRIALS_KEPT:
            self.kept.append(trial)

    def _judge_side(self, call: Usage) -> None:
        self.judge_usage += call
        cost = self._price(call)
        self.judge_cost = None if cost is None or self.judge_cost is None else self.judge_cost + cost

    def _price(self, usage: Usage) -> float | None:
        cost = cost_of(usage, self.prices)
        # unknown once any priced part is unknown: a partial sum would understate the cost
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        return cost


def _over_cap(cap: float | None, trials: _Trials) -> str | None:
    """The error of a test whose spend passed its cost cap (`@test(max_cost_usd=...)`), naming
    the cost; None within the cap. A cost that cannot be priced cannot be held to a cap: an error too."""
    if cap is None:
        return None
    if trials.cost is None:
        models = sorted({m for m in (trials.usage.model, trials.judge_usage.model) if m})
        return (
            f"cost unknown against the test's cap of ${cap:g}: no price for {', '.join(models) or 'a model'} "
            "(add it to the configuration's prices)"
        )
    if trials.cost <= cap:
        return None
    judge = f"${trials.judge_cost:.6f}" if trials.judge_cost is not None else "unknown"
    return (
        f"cost ${trials.cost:.6f} passed the test's cap of ${cap:g} "
        f"(agent ${trials.cost - (trials.judge_cost or 0.0):.6f}, judge {judge})"
    )


def _group(analyzers: list[Analyzer]) -> list[tuple[bool, list[Analyzer]]]:
    """Consecutive analyzers of the same kind (async or sync), in order."""
    groups: list[tuple[bool, list[Analyzer]]] = []
    for analyze in analyzers:
        kind = is_async_callable(analyze)
        if groups and groups[-1][0] == kind:
            groups[-1][1].append(analyze)
        else:
            groups.append((kind, [analyze]))
    return groups


def _scrubbed(result: TestResult, piecewise: bool = False) -> TestResult:
    """`result` without any secret the process knows (`scrub_model`)."""
    try:
        return scrub_model(result, piecewise=piecewise)
    except PydanticSerializationError:  # text that cannot be UTF-8 (a lone surrogate): escaped first
        return scrub_model(encodable(result), piecewise=piecewise)


def _apply(analyzers: list[Analyzer], result: TestResult, traces: Any) -> TestResult:
    for analyze in analyzers:
        result = analyze(result, traces)
    return result
