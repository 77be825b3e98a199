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
from agent_health.connectors.parsing import ParseError, artifacts_of, parse_body
from agent_health.errors import AgentError, ConfigError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest

# The parameters through which a function holds a conversation.
CONVERSATION_PARAMS = ("messages", "history", "session", "conversation_id")


class PythonSettings(ConnectorSettings):
    """Settings of the python connector."""

    function: Any = Field(description="'module:function' (imported with the project root on sys.path) or a callable.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for the function.")
    response_paths: dict[str, str] = Field(default_factory=dict, description="Paths into a returned dict.")


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
        self._params = set(inspect.signature(self.fn).parameters)
        self._var_kw = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(self.fn).parameters.values())

    @property
    def endpoint(self) -> str:
        f = self.agent.settings.get("function")
        return f if isinstance(f, str) else f"python:{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', f)}"

    def _kwargs(self, request: AgentRequest) -> dict[str, Any]:
        available = {
            "prompt": request.prompt,
            "context": [dict(c) for c in request.context],
            "run_id": request.run_id,
            "trace_id": request.trace_id,
            "traceparent": request.traceparent,
            "provisioned": dict(request.provisioned),
            "env": dict(request.env),
            "files": dict(request.files),
            "settings": dict(self.agent.settings),
            "request": request,
            "messages": request.messages,
            "history": [dict(m) for m in request.history],
            "turn": request.turn,
            "conversation_id": request.conversation_id,
            "session": request.session,  # the conversation's own dict: what the function keeps stays
            **self.settings.kwargs,
        }
        return available if self._var_kw else {k: v for k, v in available.items() if k in self._params}

    def conversation_problem(self) -> str | None:
        if self._var_kw or self._params & {*CONVERSATION_PARAMS, "request"}:
            return None
        return (
            f"its function takes none of {', '.join(CONVERSATION_PARAMS)} (nor request or **kwargs), so it would "
            "see each message without the ones before"
        )

    async def run(self, request: AgentRequest) -> RunResult:
        kwargs = (await self.apply_before({"kwargs": self._kwargs(request)}, request))["kwargs"]
        started = time.perf_counter()
        limit = self.run_timeout(request)
        try:
            async with asyncio.timeout(limit):
                if inspect.iscoroutinefunction(self.fn):
                    value = await self.fn(**kwargs)
                else:
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
                if not (usage.model or usage.total_tokens):
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

        def silence() -> str:  # a repr of everything it returned: only when it is said
            return f"the function returned {'None' if value is None else f'{type(value).__name__} {shown(value)}'}"

        return await self.apply_after(value, result, silence=silence)
