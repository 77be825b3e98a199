"""Replaying the agent runs of stored results: what re-judging runs test bodies against.

`replaying({agent version: StoredRuns})` around a run makes `session.wiring.build_runtime` give
each of those agent versions a `StoredRunConnector` instead of its real connector: `agent.run()`
returns the run the stored result recorded (the n-th call of a test gets its n-th trial's run),
marked `replayed`, with its run id and trace id, so its traces stay reachable. The agent is never
called and its connector is never built (no endpoint is contacted, no secret resolved).

A context variable rather than an argument: the run path builds the runtimes itself, and one run
at a time (one task) is the scope a replay belongs to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar

from agent_health.connectors.base import Connector
from agent_health.connectors.conversation import OnTurn, UserSide
from agent_health.errors import AgentError
from agent_health.model import RunResult, TestResult
from agent_health.model.agent import AgentRequest, ResolvedAgent

NOT_CALLED = "re-judging replays stored runs and never calls the agent"


class StoredRuns:
    """The stored agent runs of one agent version: test id -> the run of each trial (None for a
    trial that never ran the agent)."""

    def __init__(self) -> None:
        self.runs: dict[str, list[RunResult | None]] = {}

    def add(self, result: TestResult) -> None:
        self.runs[result.test_id] = [t.run for t in result.trials] if result.trials else [result.run]


_replaying: ContextVar[Mapping[str, StoredRuns] | None] = ContextVar("agent_health_stored_runs", default=None)


@contextlib.contextmanager
def replaying(runs: Mapping[str, StoredRuns]) -> Iterator[None]:
    """Inside: the agent versions in `runs` replay their stored runs (see the module docstring)."""
    token = _replaying.set(runs)
    try:
        yield
    finally:
        _replaying.reset(token)


def stored_runs_for(agent_ref: str) -> StoredRuns | None:
    """The stored runs an agent version replays in the current run, or None (run the agent)."""
    runs = _replaying.get()
    return runs.get(agent_ref) if runs is not None else None


class StoredRunConnector(Connector):
    """Answers `agent.run()` with the stored run of the test and trial; never calls the agent."""

    name = "stored"

    def __init__(self, agent: ResolvedAgent, stored: StoredRuns):
        super().__init__(agent)
        self.stored = stored
        self._calls: dict[str, int] = {}  # test id -> runs handed out (trials of a test run in order)

    @property
    def endpoint(self) -> str:
        return "stored runs"

    def conversation_problem(self) -> str | None:
        return None

    async def converse(self, request: AgentRequest, user: UserSide, on_turn: OnTurn | None = None) -> RunResult:
        """A stored conversation is one stored run: replayed whole, the user side never asked."""
        return await self.run(request)

    async def run(self, request: AgentRequest) -> RunResult:
        tid = request.test_id or ""
        trial = self._calls.get(tid, 0)
        self._calls[tid] = trial + 1
        runs: Sequence[RunResult | None] = self.stored.runs.get(tid, ())
        run = runs[trial] if trial < len(runs) else None
        if run is None:
            what = f"trial {trial + 1} of its stored result" if runs else "its stored result"
            raise AgentError(
                f"agent {self.agent.ref}: test {tid!r} calls agent.run() but {what} has no agent run to replay "
                f"({NOT_CALLED}); run the test again with `agent-health run`"
            )
        if run.prompt is not None and request.prompt and request.prompt != run.prompt:
            raise AgentError(
                f"agent {self.agent.ref}: test {tid!r} now sends another prompt than its stored run did "
                f"({request.prompt[:80]!r} vs {run.prompt[:80]!r}): the test changed since, and {NOT_CALLED}; "
                "run the test again with `agent-health run`"
            )
        return run.model_copy(update={"replayed": True})
