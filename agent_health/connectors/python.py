"""The `python` connector: call `module:function` in-process (sync or async).

The function receives the keyword arguments it names among `prompt`, `context`, `run_id`,
`trace_id`, `traceparent`, `provisioned`, `env`, `files`, `settings`, `request`, and returns
text, a dict (parsed like an HTTP response body), or a `RunResult`.

In a conversation it is called once per turn, with `prompt` the turn's user message; it holds the
conversation by naming `messages` (the conversation so far as `{role, content}` messages, this
turn's last), `history` (the messages before this turn), `turn` (1-based), `conversation_id`, or
`session` (one dict for all the turns of the conversation, its own to keep state in). A function
that names none of them (nor `request` or `**kwargs`) cannot converse, and a multi-turn run of it
is refused. Sync functions run in a worker
thread so they do not block other tests; a timed-out sync function cannot be interrupted, only
abandoned (use the subprocess connector for agents that may hang).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from agent_health.connectors.common import ConnectorSettings, RealConnector, load_callable, shown
from agent_health.connectors.parsing import NO_USAGE, ParseError, artifacts_of, parse_body
from agent_health.errors import AgentError, ConfigError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.offloop import start_eagerly

# The parameters through which a function holds a conversation.
CONVERSATION_PARAMS = ("messages", "history", "session", "conversation_id")


class PythonSettings(ConnectorSettings):
    """Settings of the python connector."""

    function: Any = Field(description="'module:function' (imported with the project root on sys.path) or a callable.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for the function.")
    response_paths: dict[str, str] = Field(default_factory=dict, description="Paths into a returned dict.")


# What the function may take by name, in this order: the request's parts (fresh copies of its
# mappings, so the function cannot change the request) and the agent's settings.
_ARGUMENTS: dict[str, Callable[[PythonConnector, AgentRequest], Any]] = {
    "prompt": lambda _c, r: r.prompt,
    "context": lambda _c, r: [dict(c) for c in r.context],
    "run_id": lambda _c, r: r.run_id,
    "trace_id": lambda _c, r: r.trace_id,
    "traceparent": lambda _c, r: r.traceparent,
    "provisioned": lambda _c, r: dict(r.provisioned),
    "env": lambda _c, r: dict(r.env),
    "files": lambda _c, r: dict(r.files),
    "settings": lambda c, _r: dict(c.agent.settings),
    "request": lambda _c, r: r,
    "messages": lambda _c, r: r.messages,
    "history": lambda _c, r: [dict(m) for m in r.history],
    "turn": lambda _c, r: r.turn,
    "conversation_id": lambda _c, r: r.conversation_id,
    "session": lambda _c, r: r.session,  # the conversation's own dict: what the function keeps stays
}


class PythonConnector(RealConnector):
    name = "python"
    settings_model = PythonSettings
    settings: PythonSettings

    def __init__(self, agent: Any):
        super().__init__(agent)
        fn = load_callable(self.settings.function, f"agents.{agent.key}.settings.function", self.settings.root)
        if fn is None:
            raise ConfigError(f"setting agents.{agent.key}.settings.function is required")
        self.fn: Callable[..., Any] = fn
        self._is_async = inspect.iscoroutinefunction(self.fn)
        params = inspect.signature(self.fn).parameters
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
        self._var_kw, self._params = var_kw, set(params)
        # The keyword arguments the function takes, each with how to get its value: only those are
        # built per call (copying every mapping of the request for a function that takes only the
        # prompt was most of this connector's own cost per run); `kwargs` settings win, as before.
        extra = self.settings.kwargs
        self._getters: list[tuple[str, Callable[[PythonConnector, AgentRequest], Any]]] = [
            (name, (lambda value: lambda _c, _r: value)(extra[name]) if name in extra else get)
            for name, get in _ARGUMENTS.items()
            if var_kw or name in params
        ]
        self._extra = {k: v for k, v in extra.items() if k not in _ARGUMENTS and (var_kw or k in params)}

    @property
    def endpoint(self) -> str:
        f = self.agent.settings.get("function")
        return f if isinstance(f, str) else f"python:{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', f)}"

    def _kwargs(self, request: AgentRequest) -> dict[str, Any]:
        kwargs = {name: get(self, request) for name, get in self._getters}
        if self._extra:
            kwargs.update(self._extra)
        return kwargs

    def conversation_problem(self) -> str | None:
        if self._var_kw or self._params & {*CONVERSATION_PARAMS, "request"}:
            return None
        return (
            f"its function takes none of {', '.join(CONVERSATION_PARAMS)} (nor request or **kwargs), so it would "
            "see each message without the ones before"
        )

    async def run(self, request: AgentRequest) -> RunResult:
        kwargs = self._kwargs(request)
        if self.before_request is not None:
            kwargs = (await self.apply_before({"kwargs": kwargs}, request))["kwargs"]
        started = time.perf_counter()
        limit = self.run_timeout(request)
        try:
            if self._is_async:
                # the timeout is armed once the function waits: one that answers at once needs none
                deadline = asyncio.get_running_loop().time() + limit
                answered, value = start_eagerly(self.fn(**kwargs))
                if not answered:
                    async with asyncio.timeout_at(deadline):
                        value = await value
            else:
                async with asyncio.timeout(limit):
                    value = await asyncio.to_thread(self.fn, **kwargs)
                    if inspect.isawaitable(value):
                        value = await value
        except TimeoutError:
            raise self.fail(f"did not return within timeout_s={limit:g}s") from None
        except AgentError:
            raise
        except Exception as exc:
            raise self.fail(f"raised {type(exc).__name__}: {exc}") from exc
        duration = (time.perf_counter() - started) * 1000
        if isinstance(value, RunResult):
            updates: dict[str, Any] = {"run_id": value.run_id or request.run_id, "agent": self.agent.ref}
            if not value.duration_ms:
                updates["duration_ms"] = duration
            if value.prompt is None:
                updates["prompt"] = request.prompt
            if not value.trace_id:
                updates["trace_id"] = request.trace_id
            result = value.model_copy(update=updates)
        else:
            try:
                output, steps, usage = parse_body(value, self.settings.response_paths, self.settings.model)
                # the parser's shared empty usage (no model configured) is told apart by identity
                if usage is not NO_USAGE and not (usage.model or usage.total_tokens):
                    usage = usage.model_copy(update={"model": self.settings.model})
                artifacts = artifacts_of(value)
            except ParseError as exc:
                raise self.fail(str(exc)) from None
            raw = value if isinstance(value, (dict, list, str, int, float, bool, type(None))) else repr(value)
            result = self.run_result(
                request,
                output,
                steps,
                usage=usage,
                raw_events=(raw,),
                duration_ms=duration,
                artifacts=artifacts,
            )
        return await self.apply_after(value, result, silence=lambda: _silence(value))


def _silence(value: Any) -> str:
    """What the function gave instead of an answer, for the error that says so."""
    return f"the function returned {'None' if value is None else f'{type(value).__name__} {shown(value)}'}"
