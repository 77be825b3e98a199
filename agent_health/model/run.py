"""What one `agent.run()` returns: a normalized, immutable record of one agent invocation."""

from __future__ import annotations

import json as _json
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_health.errors import TracesNotEnabled

# The running test hands the trace views of its runs (run id -> view) over through this variable
# (set with the test's context), so `result.traces` works in a body while RunResult stays data.
TRACE_VIEWS: ContextVar[Mapping[str, Any] | None] = ContextVar("agent_health_trace_views", default=None)

StepKind = Literal["message", "thinking", "tool_call", "tool_result"]
STEP_KINDS: tuple[str, ...] = ("message", "thinking", "tool_call", "tool_result")
Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
# Who speaks in a step whose connector did not say: tool results come from the tool, the rest from the agent.
_DEFAULT_ROLE: dict[str, Role] = {"message": "assistant", "thinking": "assistant", "tool_call": "assistant"}


class Step(BaseModel):
    """One trajectory step. Tool calls and their results are linked by `call_id`."""

    model_config = ConfigDict(frozen=True)

    kind: StepKind = Field(description="message | thinking | tool_call | tool_result.")
    role: Role = Field(
        "assistant",  # when absent, filled in from `kind` by the validator below
        description="Who speaks: system | user | assistant | tool. Defaults from `kind`: tool_result is "
        "`tool`, every other kind `assistant`.",
    )
    content: str = Field("", description="Text of a message/thinking step, or a tool result's output.")
    tool: str | None = Field(None, description="Tool name for tool_call and tool_result steps.")
    args: dict[str, Any] | None = Field(None, description="Arguments of a tool_call.")
    call_id: str | None = Field(None, description="Links a tool_result to its tool_call.")
    is_error: bool = Field(False, description="True when a tool_result reports a tool failure.")
    started_ms: float | None = Field(None, description="Offset from the run start, in milliseconds.")
    duration_ms: float | None = Field(None, description="How long the step took, when known.")
    input_tokens: int | None = Field(None, description="Tokens consumed by the model call that produced this step.")
    output_tokens: int | None = Field(None, description="Tokens produced by the model call behind this step.")

    @model_validator(mode="before")
    @classmethod
    def _role_from_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("role") is None:
            data = {**data, "role": _DEFAULT_ROLE.get(str(data.get("kind")), "tool")}
        return data


class Artifact(BaseModel):
    """A file the agent produced: its name, media type and size, with a stored copy (`content`, text or
    base64) when it was small enough to keep, else a reference (`uri`) to where it lives."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="File name (relative path) as the agent produced it.")
    media_type: str = Field("application/octet-stream", description="IANA media type, e.g. text/markdown.")
    size: int = Field(0, description="Size in bytes.")
    sha256: str | None = Field(None, description="Hex SHA-256 of the file's bytes, when they were read.")
    content: str | None = Field(None, description="The stored copy: the text, or base64 when `encoding` is base64.")
    encoding: Literal["utf-8", "base64"] | None = Field(None, description="How `content` holds the bytes.")
    uri: str | None = Field(None, description="Where the file lives when no copy is stored (or as well).")
    omitted: str | None = Field(
        None, description="Why no copy is stored though the file was small enough: the run's cap on artifact copies."
    )


class Usage(BaseModel):
    """Token usage. Names follow OpenTelemetry GenAI (`gen_ai.usage.input_tokens`, ...)."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(0, description="gen_ai.usage.input_tokens")
    output_tokens: int = Field(0, description="gen_ai.usage.output_tokens")
    total_tokens: int = Field(0, description="input + output tokens")
    model: str | None = Field(None, description="gen_ai.request.model (or response model)")
    llm_calls: int = Field(0, description="Model calls made, when the agent reports them.")
    retries: int = Field(0, description="Transport retries the connector made for this run.")
    cost_usd: float | None = Field(
        None,
        description="Cost the agent itself reported (e.g. Claude Code's total_cost_usd); when set it is the "
        "run's cost instead of the price-table estimate.",
    )
    unreported: bool = Field(
        False,
        description="The agent reported no usage at all: its tokens are unknown (not 0), and so is its cost "
        "unless it reported that (`cost_usd`).",
    )

    @classmethod
    def of(cls, input_tokens: int = 0, output_tokens: int = 0, **kw: Any) -> Usage:
        return cls(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens, **kw
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            model=self.model or other.model,
            llm_calls=self.llm_calls + other.llm_calls,
            retries=self.retries + other.retries,
            cost_usd=None if self.cost_usd is None and other.cost_usd is None else _add_cost(self, other),
            unreported=self.unreported or other.unreported,  # a sum with an unknown part is unknown
        )


class Turn(BaseModel):
    """One turn of a conversation: the user's message and what the agent did to answer it. Its
    steps are `trajectory[start:end]` of the run (the first is the user's message; their
    `started_ms` count from the turn's start), its raw events the `events` that follow the earlier
    turns' in `raw_events`."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(description="1-based turn number.")
    user: str = Field(description="The user's message that opened the turn.")
    output: str = Field("", description="The agent's answer in this turn.")
    start: int = Field(description="Index in the run's trajectory of this turn's user message.")
    end: int = Field(description="Index in the run's trajectory one past this turn's last step.")
    events: int = Field(0, description="How many raw events this turn added to the run's raw_events.")
    usage: Usage = Field(default_factory=Usage, description="Token usage of the agent in this turn.")
    duration_ms: float = Field(0.0, description="How long the agent took to answer this turn, in milliseconds.")
    replayed: bool = Field(False, description="True when this turn came from a recording.")


ConversationEnd = Literal["script_done", "user_stopped", "goal_reached", "gave_up", "max_turns"]
CONVERSATION_ENDS: tuple[str, ...] = ("script_done", "user_stopped", "goal_reached", "gave_up", "max_turns")


class Conversation(BaseModel):
    """How a multi-turn run went: who played the user, and how and why the conversation ended."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["scripted", "simulated"] = Field(
        description="scripted: the test's `turns`; simulated: a user played by a model or the demo policy."
    )
    ended: ConversationEnd = Field(
        description="script_done (every scripted turn sent), user_stopped (a turn function returned None), "
        "goal_reached, gave_up or max_turns (the simulated user's decision or bound)."
    )
    goal: str | None = Field(None, description="The simulated user's goal.")
    goal_reached: bool | None = Field(None, description="Whether the simulated user reached its goal.")
    turns_to_goal: int | None = Field(None, description="The turn whose answer reached the goal.")
    user_model: str | None = Field(None, description="Who played the user: provider:model, or the demo policy.")
    user_usage: Usage = Field(
        default_factory=Usage,
        description="Tokens the simulated user's model calls of this run spent (counted with the judges', not "
        "the agent's; cache hits and replayed decisions spend none).",
    )
    user_calls: int = Field(0, description="Model calls the simulated user made (cache hits and replays excluded).")


class RunResult(BaseModel):
    """An immutable record of one agent invocation, with helpers for assertions.

    A conversation (`agent.run(turns=...)` or `agent.run(user=...)`) is one run too: its
    trajectory holds every turn in order, `turns` marks where each begins and ends, `output` is the
    last answer, and usage and duration are the sums over the turns. `turn(n)` is one turn's run.

    Inside a running test, `traces` is the lazy view of this run's traces (see `agent_health.traces`).
    """

    model_config = ConfigDict(frozen=True)
    # The characters of text this very object holds, once `text_over` has counted them all (see
    # `text_chars`), and its JSON text, once a secrets check made it (`remember_json`). Slots, not
    # fields: never copied (`model_copy`, pickling), never compared.
    __slots__ = ("_chars", "_json")

    output: str = Field("", description="The agent's final answer text.")
    trajectory: tuple[Step, ...] = Field((), description="Ordered steps the agent took.")
    run_id: str = Field(description="Correlation id of this run (also sent to the agent).")
    trace_id: str | None = Field(None, description="W3C trace id of this run, when one was sent.")
    agent: str = Field("", description="The agent version that ran, as KEY@VERSION.")
    prompt: str | None = Field(None, description="The prompt actually sent.")
    context: tuple[dict[str, Any], ...] = Field((), description="The context actually sent.")
    started_at: float = Field(0.0, description="Unix time the run started.")
    duration_ms: float = Field(0.0, description="Wall-clock duration of the run in milliseconds.")
    usage: Usage = Field(default_factory=Usage, description="Token usage of the agent.")
    raw_events: tuple[Any, ...] = Field((), description="Raw protocol events/responses, secrets removed.")
    replayed: bool = Field(False, description="True when this result came from a recording.")
    artifacts: tuple[Artifact, ...] = Field((), description="Files the agent produced.")
    turns: tuple[Turn, ...] = Field(
        (), description="The turns of a conversation, in order; empty for a run of one prompt and one answer."
    )
    conversation: Conversation | None = Field(None, description="How a conversation went; None for one turn.")

    def remember_json(self, text: str) -> None:
        """Keep `text`, this run's `model_dump_json()` as just made (its connector's check for
        secrets), so the result holding the run writes it as it is (`model_json`) instead of
        encoding the run again. A run is frozen and nothing changes the values inside it in
        place, so the text stays true (a test body that changed a dict inside its run would
        change the object, not the record of what the agent answered, whose text is the one
        checked for secrets again with its result)."""
        _JSON.__set__(self, text)

    def forget_json(self) -> None:
        """Drop the remembered text (once the result holding the run was encoded)."""
        try:
            _JSON.__delete__(self)
        except AttributeError:
            pass

    def turn(self, n: int) -> RunResult:
        """The run of turn `n` alone (1-based; -1 is the last): its steps from the user's message on,
        its answer as `output`, its usage and duration, so every matcher works on one turn
        (`expect(result.turn(2)).to_have_called_tool(...)`). A run of one turn is its own turn 1."""
        count = len(self.turns) or 1
        index = n - 1 if n > 0 else count + n
        if isinstance(n, bool) or not isinstance(n, int) or n == 0 or not 0 <= index < count:
            raise IndexError(
                f"turn({n!r}): this run has {count} turn{'s' if count > 1 else ''}; "
                f"ask for 1 to {count} (or -1 for the last)"
            )
        if not self.turns:
            return self
        t = self.turns[index]
        first_event = sum(x.events for x in self.turns[:index])
        return self.model_copy(
            update={
                "output": t.output,
                "trajectory": self.trajectory[t.start : t.end],
                "prompt": t.user,
                "usage": t.usage,
                "duration_ms": t.duration_ms,
                "raw_events": self.raw_events[first_event : first_event + t.events],
                "replayed": t.replayed,
                "turns": (),
                "conversation": None,
            }
        )

    @property
    def agent_steps(self) -> tuple[Step, ...]:
        """The trajectory without its first event, the user prompt (what the agent did)."""
        t = self.trajectory
        return t[1:] if t and t[0].role == "user" and t[0].kind == "message" else t

    def messages(self, role: str | None = None) -> list[Step]:
        """Message steps, optionally only those of one role (system, user, assistant, tool)."""
        return [s for s in self.trajectory if s.kind == "message" and (role is None or s.role == role)]

    def tool_calls(self, name: str | None = None) -> list[Step]:
        """All tool_call steps, optionally only those of tool `name`."""
        return [s for s in self.trajectory if s.kind == "tool_call" and (name is None or s.tool == name)]

    def first_tool_call(self, name: str) -> Step | None:
        """The first call of tool `name`, or None."""
        return next((s for s in self.trajectory if s.kind == "tool_call" and s.tool == name), None)

    def steps_of_type(self, kind: str) -> list[Step]:
        """All steps of one kind (message, thinking, tool_call, tool_result)."""
        return [s for s in self.trajectory if s.kind == kind]

    def json(self) -> Any:  # type: ignore[override]
        """The output parsed as JSON (a fenced ```json block is accepted), or None."""
        return parse_json_output(self.output)

    @property
    def traces(self) -> Any:
        """Lazy, honest view of this run's traces (a `TracesView`), handed over by the running test;
        raises TracesNotEnabled when the agent has no traces or no test is running."""
        views = TRACE_VIEWS.get()
        view = views.get(self.run_id) if views else None
        if view is None:
            raise TracesNotEnabled(
                f"traces not enabled for agent {self.agent or '?'}; configure a trace source for this agent"
            )
        return view


def _add_cost(a: Usage, b: Usage) -> float | None:
    """A reported cost plus another: unknown when one side has tokens and no reported cost (its
    price is for the price table, which cannot be mixed in here)."""
    total = 0.0
    for u in (a, b):
        if u.cost_usd is not None:
            total += u.cost_usd
        elif u.input_tokens or u.output_tokens:
            return None
    return total


def parse_json_output(text: str) -> Any:
    text = (text or "").strip()
    if text.startswith("```"):
        body = text.split("\n", 1)[1] if "\n" in text else ""
        text = body.rsplit("```", 1)[0].strip()
    try:
        return _json.loads(text)
    except (ValueError, TypeError):
        return None


# A model holding more text than this is scrubbed of secrets piece by piece in a worker thread
# (agent_health.config.secrets): scanning text for them goes at about 15 MB/s, so this much takes
# a few milliseconds on the event loop, and more would stop it (200 MB of artifacts: ten seconds).
SCRUB_INLINE_CHARS = 1 << 16
_COUNTED_PARTS = 2_000  # parts of a JSON-like value counted before it is taken as large


_CHARS = RunResult.__dict__["_chars"]  # the slots' descriptors
_JSON = RunResult.__dict__["_json"]


def text_over(runs: Iterable[RunResult | None], chars: int = SCRUB_INLINE_CHARS) -> bool:
    """Whether these runs hold more than `chars` characters of text in all (output, steps and
    their arguments, raw events, context, artifacts). Counted until it knows: microseconds for a
    usual run, and a JSON-like value of many parts counts as large."""
    left = chars
    seen: list[int] = []  # a run given twice (a result's run is its last trial's) counts once
    for run in runs:
        if run is None or id(run) in seen:
            continue
        seen.append(id(run))
        left -= text_chars(run, left)
        if left < 0:
            return True
    return False


def text_chars(run: RunResult, budget: int = SCRUB_INLINE_CHARS) -> int:
    """The characters of text `run` holds (as `text_over` counts them), counted until past
    `budget` (then some number above it). A count that finished is kept on the run, so the
    engine's second check of a test's run (its connector's, then its result's) reads it instead
    of walking the run's steps and events again (that walk was about 2% of the instructions of a
    fixed-answer test). A run is frozen and nothing changes the values inside it in place, so the
    count stays true."""
    try:
        return _CHARS.__get__(run)  # type: ignore[no-any-return]
    except AttributeError:  # not counted yet (through the slot: `run._chars` took a microsecond more)
        pass
    n = len(run.output)
    for a in run.artifacts:
        n += len(a.content or "")
    for step in run.trajectory:
        n += len(step.content)
        if step.args and n <= budget:
            n += _text_chars(step.args, budget - n)
    if run.raw_events and n <= budget:
        n += _text_chars(run.raw_events, budget - n)
    if run.context and n <= budget:
        n += _text_chars(run.context, budget - n)
    if n <= budget:
        _CHARS.__set__(run, n)
    return n


def with_chars(run: RunResult, added: int, of: RunResult) -> RunResult:
    """`run`, made from `of` with `added` characters of text more, knowing its count when `of`'s
    was known (a copy forgets it)."""
    try:
        _CHARS.__set__(run, _CHARS.__get__(of) + added)
    except AttributeError:  # `of` was not counted
        pass
    return run


def _text_chars(value: Any, budget: int) -> int:
    """Characters of the strings inside a JSON-like value, counted until past `budget` (or past
    `_COUNTED_PARTS` parts: then `budget + 1`). The usual types are told by their exact type
    first (an ABC's isinstance check is a few times dearer, and this runs twice a test)."""
    stack, total, parts = [value], 0, 0
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        parts += 1
        kind = type(v)
        if kind is str:
            total += len(v)
        elif kind is dict:
            extend(v.values())
        elif kind is list or kind is tuple:
            extend(v)
        elif isinstance(v, str):
            total += len(v)
        elif isinstance(v, Mapping):
            extend(v.values())
        elif isinstance(v, (list, tuple)):
            extend(v)
        if total > budget or parts > _COUNTED_PARTS:
            return budget + 1
    return total
