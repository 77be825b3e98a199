"""A conversation inside one `agent.run()`: the turn loop every connector inherits.

The user side (scripted turns, or a simulated user: a `UserSide`) writes each user message; the
connector sends it as one turn (`Connector.run` with `request.turn`, `history`, `conversation_id`
and the conversation's `session` dict) and keeps what the next turn needs (`Connector.session_of`:
a session id the agent gave). Each turn is a request of its own, so record and replay see every
turn (the recording key covers the conversation so far). The turns fold into one `RunResult`: the
trajectory of every turn in order with `turns` marking the boundaries, the last answer as
`output`, usage and duration summed, and `conversation` saying who played the user and why it ended.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from agent_health.errors import AgentError
from agent_health.model import Artifact, RunResult, Step, Usage
from agent_health.model.agent import AgentRequest
from agent_health.model.limits import TURNS_MAX
from agent_health.model.run import CONVERSATION_ENDS, Conversation, ConversationEnd, Turn

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.connectors.base import Connector


@dataclass(frozen=True)
class UserTurn:
    """What the user side said next: a message, or None when the conversation is over (`ended`
    says why). `goal_reached`: the agent's last answer reached the user's goal."""

    message: str | None
    ended: ConversationEnd | None = None
    goal_reached: bool = False
    usage: Usage = field(default_factory=Usage)
    calls: int = 0  # model calls made for it (a cache hit or a replay makes none)
    replayed: bool = False

    def document(self) -> dict[str, Any]:
        """The JSON form a recording keeps."""
        return {
            "message": self.message,
            "ended": self.ended,
            "goal_reached": self.goal_reached,
            "usage": self.usage.model_dump(mode="json"),
        }

    @classmethod
    def of(cls, doc: Any, where: str) -> UserTurn:
        """A recorded user turn; an AgentError naming the recording when it is not one."""
        bad = f"recording {where} is not a user turn"
        if not isinstance(doc, dict):
            raise AgentError(f"{bad}: {type(doc).__name__}; delete it or re-record")
        message, ended = doc.get("message"), doc.get("ended")
        if not (message is None or isinstance(message, str)) or (message is None and ended not in CONVERSATION_ENDS):
            raise AgentError(f"{bad}: no message and no end; delete it or re-record")
        try:
            usage = Usage.model_validate(doc.get("usage") or {})
        except ValueError as exc:
            raise AgentError(f"{bad}: {exc}; delete it or re-record") from None
        return cls(message=message, ended=ended, goal_reached=bool(doc.get("goal_reached")), usage=usage, replayed=True)


class UserSide(abc.ABC):
    """Who writes the user's messages of a conversation."""

    mode: ClassVar[str] = "scripted"
    goal: str | None = None
    label: str | None = None  # who plays the user (provider:model, the demo policy), None for a script

    @abc.abstractmethod
    async def next(self, so_far: RunResult | None) -> UserTurn:
        """The next message given the conversation so far (None: the opening message, asked only
        when the test gives no prompt)."""

    def recording(self) -> dict[str, Any] | None:
        """What identifies this user's decisions in recordings, or None when they are not recorded
        (a script: its turns come from the test itself)."""
        return None


def transcript(so_far: RunResult | None) -> list[dict[str, str]]:
    """The conversation so far as `{user, agent}` exchanges (what a user's next message may depend on)."""
    if so_far is None:
        return []
    if not so_far.turns:
        return [{"user": so_far.prompt or "", "agent": so_far.output}]
    return [{"user": t.user, "agent": t.output} for t in so_far.turns]


OnTurn = Callable[[RunResult], None]


class UserCodeRaised(Exception):
    """The test's own code on the user side (a turn function) raised `original`: the runtime
    re-raises it as the test's, never as the agent's failure (an `expect` or `assert` in a turn
    function fails the test as in its body)."""

    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


async def hold_conversation(
    connector: Connector, request: AgentRequest, user: UserSide, on_turn: OnTurn | None = None
) -> RunResult:
    """Run a conversation through `connector`: the request's prompt (or the user's opening
    message) as turn 1, then each message `user` writes after the agent's answer, until it says
    the conversation is over (or TURNS_MAX turns). `on_turn` sees the conversation after each turn
    (so a run cut off by its timeout keeps the turns it finished)."""
    state = request.session if request.session else {}
    base = request.model_copy(update={"session": state})
    user_usage, user_calls = Usage(), 0
    goal_turn: int | None = None
    message = request.prompt
    if not message:
        opening = await user.next(None)
        if not opening.replayed:
            user_usage, user_calls = user_usage + opening.usage, user_calls + opening.calls
        if not opening.message:
            raise connector_error(connector, "the simulated user wrote no opening message")
        message = opening.message
    results: list[RunResult] = []
    messages: list[str] = []
    history: list[dict[str, Any]] = []
    ended: ConversationEnd = "max_turns"

    def info(end: ConversationEnd) -> Conversation:
        return Conversation(
            mode="simulated" if user.mode == "simulated" else "scripted",
            ended=end,
            goal=user.goal,
            goal_reached=(goal_turn is not None) if user.mode == "simulated" else None,
            turns_to_goal=goal_turn,
            user_model=user.label,
            user_usage=user_usage,
            user_calls=user_calls,
        )

    while True:
        number = len(results) + 1
        turn_request = base.model_copy(
            update={"prompt": message, "turn": number, "history": tuple(history), "session": state}
        )
        result = await connector.run(turn_request)
        state.update(connector.session_of(result))
        results.append(result)
        messages.append(message)
        history += [{"role": "user", "content": message}, {"role": "assistant", "content": result.output}]
        so_far = combine(request, results, messages, info("max_turns"))
        if on_turn is not None:
            on_turn(so_far)
        if number >= TURNS_MAX:
            break
        decision = await user.next(so_far)
        if not decision.replayed:  # a replayed decision spent nothing now
            user_usage, user_calls = user_usage + decision.usage, user_calls + decision.calls
        if decision.goal_reached and goal_turn is None:
            goal_turn = number
        if decision.message is None:
            ended = decision.ended or "user_stopped"
            break
        message = decision.message
    return combine(request, results, messages, info(ended))


def connector_error(connector: Connector, what: str) -> AgentError:
    return AgentError(f"agent {connector.agent.ref} ({connector.endpoint}): {what}")


def combine(
    request: AgentRequest, results: list[RunResult], messages: list[str], conversation: Conversation
) -> RunResult:
    """One run of the turns so far (see the module docstring). A turn whose connector did not open
    its trajectory with the user's message gets it, so each turn starts at its user message; its
    steps' `started_ms` stay offsets from the turn's own start."""
    steps: list[Step] = []
    turns: list[Turn] = []
    raw: list[Any] = []
    artifacts: list[Artifact] = []
    usage: Usage | None = None
    duration = 0.0
    for number, (run, message) in enumerate(zip(results, messages), start=1):
        start = len(steps)
        trajectory = run.trajectory
        if not (trajectory and trajectory[0].role == "user" and trajectory[0].kind == "message"):
            steps.append(Step(kind="message", role="user", content=message))
        steps.extend(trajectory)
        raw.extend(run.raw_events)
        artifacts.extend(run.artifacts)
        turns.append(
            Turn(
                index=number,
                user=message,
                output=run.output,
                start=start,
                end=len(steps),
                events=len(run.raw_events),
                usage=run.usage,
                duration_ms=run.duration_ms,
                replayed=run.replayed,
            )
        )
        usage = run.usage if usage is None else usage + run.usage
        duration += run.duration_ms
    first, last = results[0], results[-1]
    replayed = all(r.replayed for r in results)
    return RunResult(
        output=last.output,
        trajectory=tuple(steps),
        # a conversation replayed whole keeps the recorded ids, so its traces stay reachable
        run_id=first.run_id if replayed else request.run_id or first.run_id,
        trace_id=first.trace_id if replayed else request.trace_id or first.trace_id,
        agent=last.agent,
        prompt=messages[0],
        context=request.context,
        started_at=first.started_at,
        duration_ms=duration,
        usage=usage or Usage(unreported=True),
        raw_events=tuple(raw),
        replayed=replayed,
        artifacts=tuple(artifacts),
        turns=tuple(turns),
        conversation=conversation,
    )


def agent_usage_spent(run: RunResult) -> tuple[Usage, bool]:
    """What a run spent now, and whether all of it was replayed: a conversation counts the turns
    that were not replayed."""
    if not run.turns:
        return run.usage, run.replayed
    live = [t.usage for t in run.turns if not t.replayed]
    total = Usage()
    for u in live:
        total = total + u
    return total, not live


__all__ = [
    "OnTurn",
    "UserCodeRaised",
    "UserSide",
    "UserTurn",
    "agent_usage_spent",
    "combine",
    "hold_conversation",
    "transcript",
]
