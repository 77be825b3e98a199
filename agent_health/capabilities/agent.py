"""The `agent` fixture: `agent.run()` invokes the agent exactly once per test."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from agent_health.capabilities.context import Pending, TestContext, bridge, current_context
from agent_health.connectors.base import random_hex
from agent_health.connectors.conversation import UserCodeRaised, UserSide, UserTurn, agent_usage_spent
from agent_health.errors import AgentRunTwiceError, ConversationError, InfrastructureError
from agent_health.judges.simulated_user import simulated_user_side
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.case import to_context
from agent_health.model.conversation import SimulatedUser, check_turns
from agent_health.model.copies import built
from agent_health.model.validation import describe_errors
from agent_health.offloop import call
from agent_health.spend import current_tab


class AgentFixture:
    """Bound to one test. `run()` returns an immutable RunResult; a second call raises."""

    def __init__(self, ctx: TestContext):
        self._ctx = ctx

    @property
    def key(self) -> str:
        return self._ctx.info.agent

    def run(
        self,
        prompt: str | None = None,
        *,
        context: Iterable[Any] | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, Any] | None = None,
        provisioned: Mapping[str, Any] | None = None,
        turns: Iterable[Any] | None = None,
        user: SimulatedUser | Mapping[str, Any] | None = None,
    ) -> Any:
        """Run the agent once. Uses the test's prompt and context when none are given.

        A conversation is one run too: `turns` are the user's next messages after the prompt, each
        sent once the agent answered the one before (a string, or a function of the conversation
        so far returning one, or None to end it); `user` is a `SimulatedUser` that writes them.
        Without either, a data case's own `turns` or `user` apply."""
        ctx = self._ctx
        with ctx.lock:
            ctx.check_open("agent.run()")
            if ctx.run_started:
                raise AgentRunTwiceError(
                    f"test {ctx.case.name!r}: agent.run() was already called; a test runs the agent once "
                    "(one test, one trajectory, one comparable data point)"
                )
            ctx.run_started = True
        case = ctx.case
        if turns is None and user is None:  # the usual call: the test's own prompt, turns or user
            script, simulated = case.turns, case.user
        else:
            where = f"test {case.name!r}: agent.run()"
            if turns is not None and user is not None:
                raise TypeError(f"{where}: give turns= (a script) or user= (a simulated user), not both")
            script = check_turns(turns, where) if turns is not None else ()
            simulated = _simulated(user, where) if user is not None else None
        text = prompt if prompt is not None else case.prompt
        if simulated is not None and simulated.opening is not None and prompt is None:
            text = simulated.opening
        if not text and simulated is None:
            raise InfrastructureError(
                f"test {case.name!r}: agent.run() has no prompt; pass one or set prompt= on @test"
            )
        side: UserSide | None = None
        if simulated is not None:
            side = simulated_user_side(simulated, ctx.judges, case.id)
        elif script:
            side = ScriptedUser(script, case.name)
        items = to_context(context) if context is not None else case.context
        # empty mappings are left to their defaults: each one given is validated (copied) again
        given = {}
        if env or files or provisioned:
            given = {n: dict(v) for n, v in (("env", env), ("files", files), ("provisioned", provisioned)) if v}
        fields = {
            "prompt": text or "",
            "context": tuple(i.model_dump() for i in items) if items else (),
            **given,
            "test_id": case.id,
            "timeout_s": case.timeout_s,
            # the runtime's ids, made here: the runtime then has no copy of the request to make
            "run_id": random_hex(128),
            "trace_id": random_hex(128),
            "span_id": random_hex(64),
            "conversation_id": random_hex(64) if side is not None else "",
        }
        # the test's own values (validated as it loaded) are not validated again; what the body gave is
        trusted = not given and type(fields["prompt"]) is str
        request = built(AgentRequest, fields) if trusted else AgentRequest(**fields)
        out = bridge(ctx, self._invoke(request, side))
        if isinstance(out, RunResult):
            return out
        ctx.run_call = PendingRun(out)
        return ctx.run_call

    async def _invoke(self, request: AgentRequest, user: UserSide | None = None) -> RunResult:
        if self._ctx.runtime is None:
            raise InfrastructureError("no agent configured for this run")
        try:
            result = await self._ctx.runtime.invoke(request, user, self._turn_done if user is not None else None)
        except BaseException:
            # a conversation cut off (an agent error, the test's timeout) keeps the turns it finished,
            # and what they spent counts
            if (partial := self._ctx.run) is not None:
                self._count(partial)
            raise
        view = self._ctx.runtime.traces_for(result)
        if view is not None:
            self._ctx.trace_views[result.run_id] = view
        self._ctx.run = result
        self._count(result)
        return result

    def _turn_done(self, so_far: RunResult) -> None:
        self._ctx.run = so_far

    @staticmethod
    def _count(run: RunResult) -> None:
        if (tab := current_tab()) is not None:  # its spend counts against the budget from now on
            usage, replayed = agent_usage_spent(run)
            tab.count_agent(usage, replayed=replayed)


def _simulated(user: Any, where: str) -> SimulatedUser:
    if isinstance(user, SimulatedUser):
        return user
    if isinstance(user, Mapping):
        try:
            return SimulatedUser.model_validate(dict(user))
        except ValidationError as exc:
            raise ValueError(f"{where}: user: {describe_errors(exc)}") from None
    raise TypeError(f"{where}: user= takes a SimulatedUser (or its fields as a dict), got {type(user).__name__}")


class ScriptedUser(UserSide):
    """The test's scripted turns: each a string, or a function of the conversation so far (sync or
    async; sync ones run in a worker thread) returning the next message, or None to end it."""

    mode = "scripted"

    def __init__(self, turns: tuple[Any, ...], test: str):
        self.turns, self.test = turns, test

    async def next(self, so_far: RunResult | None) -> UserTurn:
        if so_far is None:  # never asked: a script always has its prompt as the opening
            raise ConversationError(f"test {self.test!r}: a scripted conversation needs a prompt")
        answered = len(so_far.turns)
        if answered > len(self.turns):
            return UserTurn(None, ended="script_done")
        item = self.turns[answered - 1]
        if not callable(item):
            return UserTurn(str(item))
        name = getattr(item, "__name__", type(item).__name__)
        try:
            value = await call(item, so_far)
        except Exception as exc:  # the test's own code: fails or errors the test as its body would
            raise UserCodeRaised(exc) from exc
        if value is None:
            return UserTurn(None, ended="user_stopped")
        if not isinstance(value, str) or not value.strip():
            raise ConversationError(
                f"test {self.test!r}: turn {answered + 1}: the turn function {name!r} returned "
                f"{type(value).__name__} {value!r:.60}; return the next message (a non-empty string), or None "
                "to end the conversation"
            )
        return UserTurn(value)


class PendingRun(Pending):
    """What `agent.run()` returns in an async body: await it for the RunResult. The engine reports
    one that was never awaited (the agent never ran) instead of passing with no signals."""


class AgentProxy:
    """`from agent_health import agent` works too: it forwards to the running test's agent."""

    def run(self, *args: Any, **kw: Any) -> Any:
        return AgentFixture(current_context("agent.run()")).run(*args, **kw)
