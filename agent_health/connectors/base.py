"""The connector contract: each connector turns one `agent.run()` into one `RunResult`.

A connector is built from a resolved agent (settings with the version's overrides applied) and
must raise `AgentError` naming the agent and endpoint on failure; the runtime wraps anything else.
"""

from __future__ import annotations

import abc
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar

from agent_health.connectors.conversation import OnTurn, UserCodeRaised, UserSide, hold_conversation
from agent_health.connectors.registry import EXTRAS, REGISTRY
from agent_health.errors import AgentError, ConfigError, ConversationError
from agent_health.model import Artifact, RunResult, Step, Usage
from agent_health.model.agent import AgentRequest, ResolvedAgent
from agent_health.model.copies import built, replaced
from agent_health.model.run import with_chars


class Connector(abc.ABC):
    """Base class of connectors."""

    name: ClassVar[str] = ""

    def __init__(self, agent: ResolvedAgent):
        self.agent = agent

    @property
    def endpoint(self) -> str:
        """Where this connector sends requests, for error messages."""
        return str(self.agent.settings.get("endpoint") or self.agent.settings.get("command") or self.name)

    @abc.abstractmethod
    async def run(self, request: AgentRequest) -> RunResult:
        """Invoke the agent once: one prompt, or one turn of a conversation (`request.turn` > 0,
        with the conversation so far in `request.history` and its state in `request.session`)."""

    def conversation_problem(self) -> str | None:
        """Why this agent cannot hold a conversation, or None when it can. A connector that
        carries the turns (message history, a thread, a session) returns None."""
        return f"the {self.name or type(self).__name__} connector sends one prompt per run and keeps no conversation"

    def session_of(self, result: RunResult) -> dict[str, Any]:
        """What the next turn of a conversation needs from this turn's result (a session id the
        agent gave); merged into the conversation's `session`."""
        return {}

    async def converse(self, request: AgentRequest, user: UserSide, on_turn: OnTurn | None = None) -> RunResult:
        """Hold a conversation (see connectors/conversation.py): refused, naming the agent, when
        this connector cannot; else the turn loop, each turn one `run`."""
        problem = self.conversation_problem()
        if problem:
            raise AgentError(
                f"agent {self.agent.ref} ({self.endpoint}) cannot hold a conversation: {problem}; a multi-turn run "
                "(agent.run(turns=...) or user=...) needs a connector that keeps one (demo, http, agui, python, claude)"
            )
        return await hold_conversation(self, request, user, on_turn)

    async def aclose(self) -> None:
        """Release pooled connections."""

    def run_result(
        self,
        request: AgentRequest,
        output: str,
        steps: Iterable[Step] = (),
        *,
        usage: Usage | None = None,
        raw_events: Iterable[Any] = (),
        duration_ms: float = 0.0,
        artifacts: tuple[Artifact, ...] = (),
    ) -> RunResult:
        """The `RunResult` of one call of this agent: what it answered (output, steps, usage, raw
        events, files), stamped with the request it answered (run and trace ids, prompt, context,
        the prompt as the trajectory's first step when the agent's steps do not open with it),
        when it started (`duration_ms` before now) and the agent version's ref. Every connector
        builds its result here, so the run its secrets check saw is the one the test gets (the
        runtime then has nothing to add: see `AgentRuntime.invoke`)."""
        trajectory = tuple(steps)
        if not (trajectory and trajectory[0].role == "user"):
            prompt = built(Step, {"kind": "message", "role": "user", "content": request.prompt})
            trajectory = (prompt, *trajectory)
        fields: dict[str, Any] = {
            "output": output,
            "trajectory": trajectory,
            "run_id": request.run_id,
            "trace_id": request.trace_id,
            "agent": self.agent.ref,
            "prompt": request.prompt,
            "context": request.context,
            "started_at": time.time() - duration_ms / 1000,
            "duration_ms": duration_ms,
            "usage": usage or _UNREPORTED,
            "raw_events": tuple(raw_events),
            "artifacts": artifacts,
        }
        # Values that are already what validation makes (the parsers' steps, usage and artifacts, a
        # text, a float) are not validated again; anything else a connector hands over is.
        if (
            type(output) is str
            and type(duration_ms) is float
            and type(request.prompt) is str
            and type(fields["usage"]) is Usage
            and type(artifacts) is tuple
            and all(type(step) is Step for step in fields["trajectory"])
            and all(type(a) is Artifact for a in artifacts)
        ):
            return built(RunResult, fields)
        return RunResult(**fields)


_UNREPORTED = Usage(unreported=True)  # frozen: one object for every run that reports no usage


def connector_class(name: str) -> type[Connector]:
    """The connector class of a kind (built in, or an installed package's; see connectors/registry.py),
    imported now; a ConfigError listing the known kinds when `name` is none of them."""
    try:
        cls = REGISTRY.load(name)
    except ModuleNotFoundError as exc:
        if name not in EXTRAS:
            raise
        raise ConfigError(
            f"connector {name!r} needs {exc.name}, which is not installed: pip install 'agent-health[{EXTRAS[name]}]'"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise ConfigError(
            f"connector {name!r} ({REGISTRY.target(name)}) is not a subclass of agent_health.connectors.base.Connector"
        )
    return cls


def random_hex(bits: int) -> str:
    """A random id of `bits` bits as lowercase hex, like OpenTelemetry's RandomIdGenerator: ids need
    to be unique, not secret, and os.urandom is a syscall that drops the GIL on every call. (The
    bytes' hex: half the time of formatting the int, three ids a test.)"""
    return random.getrandbits(bits).to_bytes(bits // 8, "big").hex()


# Makes the lazy traces view of one run (None when the agent has no traces).
TraceViewFactory = Callable[[RunResult, ResolvedAgent], Any]


class AgentRuntime:
    """An agent version ready to run: resolved once per engine run, shared by its tests."""

    def __init__(
        self,
        agent: ResolvedAgent,
        connector: Connector | None = None,
        trace_views: TraceViewFactory | None = None,
        settings_hash: str = "",
        capture: Any = None,
    ):
        self.agent = agent
        self._ref, self._ref_of = agent.ref, agent
        self.connector = connector or connector_class(agent.connector)(agent)
        self._trace_views = trace_views
        self.settings_hash = settings_hash  # of the version's settings, secrets excluded (results' provenance)
        # the OpenTelemetry capture of this version's runs (`agent_health.traces.capture.OTelCapture`), if any
        self.capture = capture

    @property
    def ref(self) -> str:
        """`KEY@VERSION` of its agent, made once (the engine reads it several times a test)."""
        agent = self.agent
        if self._ref_of is not agent:
            self._ref, self._ref_of = agent.ref, agent
        return self._ref

    async def invoke(
        self, request: AgentRequest, user: UserSide | None = None, on_turn: OnTurn | None = None
    ) -> RunResult:
        """One run of the agent: one prompt, or with `user` a conversation (each of its turns a
        request of the connector; see `Connector.converse`)."""
        if not (request.run_id and request.trace_id and request.span_id) or (
            user is not None and not request.conversation_id
        ):  # a request made with them is not copied
            request = request.model_copy(
                update={
                    "run_id": request.run_id or random_hex(128),
                    "trace_id": request.trace_id or random_hex(128),
                    "span_id": request.span_id or random_hex(64),
                    "conversation_id": request.conversation_id or (random_hex(64) if user is not None else ""),
                }
            )
        started = time.time()
        try:
            if self.capture is None:
                result = await self._call(request, user, on_turn)
            else:
                request = self.capture.prepare(request)  # the run's OTLP endpoint in its env (traces.source: otel)
                with self.capture.scope(request):  # in-process spans of the run kept, every turn's
                    result = await self._call(request, user, on_turn)
        except UserCodeRaised as exc:  # the test's turn function: its failure, not the agent's
            raise exc.original from None
        except (AgentError, ConversationError):
            raise
        except Exception as exc:  # the connector's own bug or an unexpected transport error
            raise AgentError(f"agent {self.ref} ({self.connector.endpoint}): {type(exc).__name__}: {exc}") from exc
        updates: dict[str, Any] = {}
        added = 0  # characters of text the updates add (`text_chars`)
        if not result.agent:
            updates["agent"] = self.ref
        if not result.started_at:
            updates["started_at"] = started
        if not (result.trajectory and result.trajectory[0].role == "user"):
            # every connector's trajectory opens with the user prompt, so a transcript reads whole
            prompt = built(Step, {"kind": "message", "role": "user", "content": request.prompt})
            updates["trajectory"] = (prompt, *result.trajectory)
            added = len(prompt.content)
        if updates:
            result = with_chars(replaced(result, updates), added, of=result)
        return result

    def _call(self, request: AgentRequest, user: UserSide | None, on_turn: OnTurn | None) -> Awaitable[RunResult]:
        return self.connector.run(request) if user is None else self.connector.converse(request, user, on_turn)

    def traces_for(self, result: RunResult) -> Any:
        """The lazy traces view of one of this agent's runs, or None when it has no traces."""
        return self._trace_views(result, self.agent) if self._trace_views else None

    async def aclose(self) -> None:
        try:
            await self.connector.aclose()
        finally:
            if self.capture is not None:
                self.capture.close()
