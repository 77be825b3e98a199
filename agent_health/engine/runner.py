"""The one engine. Every transport (CLI, Dagster) calls `Engine.run`, which yields a TestResult
per test as it finishes."""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_health.analysis.insights import with_insights
from agent_health.analysis.metrics import run_metrics
from agent_health.capabilities.agent import AgentFixture
from agent_health.capabilities.context import TestContext, TestInfo, reset_context, set_context
from agent_health.capabilities.expect import expect as expect_api
from agent_health.capabilities.judge import judge as judge_api
from agent_health.config.secrets import scrub_model
from agent_health.connectors.base import AgentRuntime
from agent_health.engine import scoring
from agent_health.engine.fixtures import FixtureScope, call
from agent_health.errors import BodyStop, InfrastructureError
from agent_health.judges.service import JudgeService
from agent_health.loader.registry import Scope
from agent_health.loader.types import LoadedTest
from agent_health.model import Signal, TestResult, TrialResult, Usage
from agent_health.pricing import total_cost

# An analyzer gets a finished result and its run's traces view (None without traces).
Analyzer = Callable[[TestResult, Any], Any]


@dataclass
class EngineOptions:
    """How the engine runs tests."""

    concurrency: int = 8
    timeout_s: float = 120.0
    epochs: int = 1
    fail_fast: bool = False
    skip_judge: bool = False
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)


class _ScopeState:
    def __init__(self, remaining: int):
        self.lock = asyncio.Lock()
        self.started = False
        self.error: str | None = None
        self.remaining = remaining
        self.finished = False


def _where(exc: BaseException) -> str:
    """'file.eval.py:12' of the innermost frame in user code (not agent_health)."""
    pkg = str(Path(__file__).resolve().parents[1])
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not frame.filename.startswith(pkg) and "asyncio" not in frame.filename:
            return f"{Path(frame.filename).name}:{frame.lineno}: "
    return ""


class Engine:
    """Runs tests against one agent version with fixtures, hooks, concurrency and timeouts."""

    def __init__(
        self,
        runtime: AgentRuntime | None,
        judges: JudgeService | None = None,
        options: EngineOptions | None = None,
        analyzers: Sequence[Analyzer] | None = None,
    ):
        self.runtime = runtime
        self.options = options or EngineOptions()
        self.judges = judges or JudgeService(skip=self.options.skip_judge)
        # offline insights are always on; transports may add analyzers (trace metrics, synthesizers)
        self.analyzers = list(analyzers) if analyzers is not None else [with_insights]
        self.hook_errors: list[str] = []
        self.not_run = 0
        # sync bodies block a thread for the whole agent call: size the pool to the concurrency
        self._threads = ThreadPoolExecutor(
            max_workers=max(1, self.options.concurrency), thread_name_prefix="agent-health-body"
        )

    @property
    def agent_ref(self) -> str:
        return self.runtime.ref if self.runtime else "none"

    async def run(self, tests: Sequence[LoadedTest]) -> AsyncIterator[TestResult]:
        """Yield one TestResult per test, in completion order."""
        scopes: dict[Scope, _ScopeState] = {}
        for t in tests:
            for s in t.spec.scope.chain():
                scopes.setdefault(s, _ScopeState(0)).remaining += 1
        queue: asyncio.Queue[TestResult | None] = asyncio.Queue()
        pending = list(reversed(tests))
        stop = asyncio.Event()

        async def worker() -> None:
            while pending and not stop.is_set():
                test = pending.pop()
                result = await self._run_test(test, scopes)
                if self.options.fail_fast and result.status != "passed":
                    stop.set()
                await queue.put(result)
            await queue.put(None)

        n_workers = max(1, min(self.options.concurrency, len(tests)))
        workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
        done = 0
        try:
            while done < n_workers:
                item = await queue.get()
                if item is None:
                    done += 1
                else:
                    yield item
        finally:
            for w in workers:
                w.cancel()
            self.not_run = len(pending)
            for scope, state in reversed(list(scopes.items())):  # scopes cut short by fail-fast
                if state.started and not state.finished:
                    await self._after_all(scope, state)

    # -- hooks ----------------------------------------------------------------
    async def _before_all(self, scope: Scope, state: _ScopeState) -> str | None:
        async with state.lock:
            if not state.started:
                state.started = True
                for hook in scope.hooks["before_all"]:
                    try:
                        await call(hook, {})
                    except Exception as exc:
                        state.error = (
                            f"before_all hook {hook.__name__!r} failed: {_where(exc)}{type(exc).__name__}: {exc}"
                        )
                        break
        return state.error

    async def _after_all(self, scope: Scope, state: _ScopeState) -> None:
        state.finished = True
        for hook in reversed(scope.hooks["after_all"]):
            try:
                await call(hook, {})
            except Exception as exc:
                self.hook_errors.append(
                    f"after_all hook {hook.__name__!r} ({scope.name or 'file'}) failed: "
                    f"{_where(exc)}{type(exc).__name__}: {exc}"
                )

    # -- one test ---------------------------------------------------------------
    async def _run_test(self, test: LoadedTest, scopes: dict[Scope, _ScopeState]) -> TestResult:
        chain = test.spec.scope.chain()
        started = time.time()
        t0 = time.perf_counter()
        setup_error = None
        for scope in chain:
            setup_error = await self._before_all(scope, scopes[scope])
            if setup_error:
                break
        epochs = max(1, test.case.epochs or self.options.epochs)
        trials = []
        views: dict[str, Any] = {}  # run id -> traces view, for the analyzers
        for epoch in range(epochs):
            if setup_error:
                trials.append(TrialResult(epoch=epoch, status="errored", error=setup_error))
                continue
            trials.append(await self._run_trial(test, epoch, views))
        for scope in reversed(chain):
            state = scopes[scope]
            state.remaining -= 1
            if state.remaining == 0 and state.started and not state.finished:
                await self._after_all(scope, state)
        result = self._result(test, trials, started, (time.perf_counter() - t0) * 1000)
        traces = views.get(result.run_id) if result.run_id else None
        for analyze in self.analyzers:
            result = analyze(result, traces)
            if inspect.isawaitable(result):  # async analyzers (the insight synthesizer) run on this loop
                result = await result
        return scrub_model(result)  # no credential the process resolved leaves the engine (judge echoes too)

    async def _run_trial(self, test: LoadedTest, epoch: int, views: dict[str, Any]) -> TrialResult:
        case, spec = test.case, test.spec
        ctx = TestContext(
            case=case,
            info=TestInfo(case.id, case.name, case.suite, case.labels, case.prompt, self.agent_ref, epoch),
            runtime=self.runtime,
            judges=self.judges,
            skip_judge=bool(case.skip_judge) or self.options.skip_judge,
            loop=asyncio.get_running_loop(),
        )
        fixtures = FixtureScope(
            {"agent": AgentFixture(ctx), "expect": expect_api, "judge": judge_api, "test_info": ctx.info},
            {**test.registry.fixtures, **spec.fixtures},
            case.name,
        )
        token = set_context(ctx)
        infra: list[str] = []
        timeout = case.timeout_s or self.options.timeout_s
        t0 = time.perf_counter()
        chain = spec.scope.chain()
        try:
            async with asyncio.timeout(timeout):
                for scope in chain:
                    for hook in scope.hooks["before_each"]:
                        await self._hook(hook, fixtures, "before_each")
                kwargs = await fixtures.kwargs_for(spec.body)
                await call(spec.body, kwargs, executor=self._threads)
                for pending in ctx.pending:
                    if not pending.awaited:
                        await pending
        except TimeoutError:
            ctx.record(
                Signal(
                    kind="deterministic",
                    role="gate",
                    name="timeout",
                    passed=False,
                    score=0.0,
                    reasoning=f"test did not finish within {timeout:g}s",
                    evidence={"expected": {"max_s": timeout}, "actual": {"s": round(time.perf_counter() - t0, 3)}},
                )
            )
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
                    reasoning=f"{_where(exc)}{exc or 'assertion failed'}",
                )
            )
        except InfrastructureError as exc:
            infra.append(str(exc))
        except Exception as exc:
            infra.append(f"{_where(exc)}{type(exc).__name__}: {exc}")
        finally:
            for pending in ctx.pending:
                pending.close()
            for scope in reversed(chain):
                for hook in reversed(scope.hooks["after_each"]):
                    try:
                        async with asyncio.timeout(timeout):
                            await self._hook(hook, fixtures, "after_each")
                    except Exception as exc:
                        infra.append(
                            str(exc)
                            if isinstance(exc, InfrastructureError)
                            else f"after_each hook failed: {type(exc).__name__}: {exc}"
                        )
            infra.extend(await fixtures.teardown())
            reset_context(token)
            views.update(ctx.trace_views)
        signals = tuple(ctx.signals)
        error = "; ".join(infra) if infra else None
        status = scoring.status_of(signals, error)
        return TrialResult(
            epoch=epoch,
            status=status,
            score=None if status == "errored" else scoring.score_of(signals),
            signals=signals,
            run=ctx.run,
            error=error or scoring.first_failure(signals),
            duration_ms=(time.perf_counter() - t0) * 1000,
        )

    async def _hook(self, hook: Callable[..., Any], fixtures: FixtureScope, kind: str) -> None:
        try:
            await call(hook, await fixtures.kwargs_for(hook))
        except (BodyStop, InfrastructureError):
            raise
        except Exception as exc:
            raise InfrastructureError(
                f"{kind} hook {hook.__name__!r} failed: {_where(exc)}{type(exc).__name__}: {exc}"
            ) from exc

    def _result(self, test: LoadedTest, trials: list[TrialResult], started: float, duration_ms: float) -> TestResult:
        last = trials[-1]
        runs = [t.run for t in trials if t.run is not None]
        usage = sum((r.usage for r in runs), Usage())
        judge_calls = [
            Usage(**s.evidence["usage"])
            for t in trials
            for s in t.signals
            if s.kind == "judge" and s.evidence and "usage" in s.evidence
        ]
        judge_usage = sum(judge_calls, Usage())
        # each judge call priced at its own model; unknown when any priced part is unknown
        cost = total_cost([*(r.usage for r in runs), *judge_calls], self.options.prices)
        fields: dict[str, Any] = {
            "status": last.status,
            "score": last.score,
            "signals": last.signals,
            "run": last.run,
            "run_id": last.run.run_id if last.run else None,
            "error": last.error,
            "evaluation_type": scoring.evaluation_type(s for t in trials for s in t.signals),
            "started_at": started,
            "duration_ms": duration_ms,
            "usage": usage,
            "judge_usage": judge_usage,
            "cost_usd": cost,
            "epochs": len(trials),
            "metrics": run_metrics(last.run, self.options.prices),
        }
        if len(trials) > 1:
            fields.update(scoring.combine_trials(trials), trials=tuple(trials))
            failing = next((t for t in trials if t.status == fields["status"]), last)
            fields["error"] = failing.error if fields["status"] != "passed" else None
        return TestResult.for_case(test.case, self.agent_ref, **fields)

    async def aclose(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self.runtime is not None:
            await self.runtime.aclose()
        await self.judges.aclose()
