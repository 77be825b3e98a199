"""Framework agents named directly: a pydantic-ai `Agent`, a LangGraph graph or LangChain runnable,
an OpenAI Agents SDK `Agent`, run in-process with no glue and read through the framework's own
public record of the run (pydantic-ai's messages, LangChain's callbacks, the Agents SDK's run items).

Each framework has its connector module here (`pydantic_ai`, `langchain`, `openai_agents`), which
imports its framework at its top: the registry loads a module only when an agent names its kind,
so nothing imports a framework unless a test uses it. What they share is here: the settings
(`agent`, `deps`), loading the object, the context as text, the run's time limit and the result.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from agent_health.connectors.common import (
    ConnectorSettings,
    RealConnector,
    call_maybe_async,
    import_attribute,
    load_callable,
)
from agent_health.errors import AgentError, ConfigError
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest, ResolvedAgent

__all__ = ["Answer", "FrameworkConnector", "FrameworkSettings", "context_text", "load_object"]


class FrameworkSettings(ConnectorSettings):
    """Settings every framework connector takes (besides the common ones)."""

    agent: Any = Field(
        description="'module:attribute' of the framework's agent (imported with the project root on sys.path), "
        "or the object itself."
    )
    deps: Any = Field(
        None,
        description="'module:function' (or a callable) called with the AgentRequest of each run; what it returns "
        "is the run's dependencies: pydantic-ai `deps`, LangGraph `context`, the Agents SDK's run `context`.",
    )


def load_object(spec: object, setting: str, root: str = ".") -> Any:
    """The object named by 'module:attribute' (imported with `root` on sys.path), or `spec` itself
    when it is not a string; a ConfigError naming the setting when it cannot be had."""
    if not isinstance(spec, str):
        if spec is None:
            raise ConfigError(f"setting {setting} is required: 'module:attribute' of the agent")
        return spec
    return import_attribute(spec, setting, root)


def context_text(context: Sequence[dict[str, Any]]) -> str:
    """A test's context items as the text a model reads: each `Description:` then its value."""
    parts = []
    for item in context:
        value = item.get("value", "")
        parts.append(f"{item.get('description') or 'Context'}:\n{value if isinstance(value, str) else repr(value)}")
    return "\n\n".join(parts)


@dataclass
class Answer:
    """What a framework's run gave, before it becomes a RunResult."""

    output: str
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(unreported=True))
    raw: list[Any] = field(default_factory=list)


def named_type(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class FrameworkConnector(RealConnector):
    """Base of the framework connectors: loads `settings.agent`, checks it is what the framework
    runs (`accepts`), and turns one `answer()` into the run's result, in the run's time limit."""

    settings_model = FrameworkSettings
    settings: FrameworkSettings
    framework = ""  # as a person names it, for messages
    expected = ""  # what `settings.agent` must be, for messages

    def __init__(self, agent: ResolvedAgent):
        super().__init__(agent)
        where = f"agents.{agent.key}.settings"
        self.target = load_object(self.settings.agent, f"{where}.agent", self.settings.root)
        if not self.accepts(self.target):
            raise ConfigError(
                f"setting {where}.agent: {self.settings.agent!r} is a {named_type(self.target)}, "
                f"not {self.expected} (connector {self.name!r})"
            )
        self.deps_factory: Callable[..., Any] | None = load_callable(
            self.settings.deps, f"{where}.deps", self.settings.root
        )

    @property
    def endpoint(self) -> str:
        spec = self.settings.agent
        return spec if isinstance(spec, str) else f"{self.name}:{named_type(spec)}"

    @abc.abstractmethod
    def accepts(self, target: Any) -> bool:
        """Whether `target` is an agent this connector runs."""

    @abc.abstractmethod
    async def answer(self, request: AgentRequest, deps: Any) -> Answer:
        """Run the agent once on the request."""

    async def run(self, request: AgentRequest) -> RunResult:
        started = time.perf_counter()
        limit = self.run_timeout(request)
        try:
            async with asyncio.timeout(limit):
                deps = await call_maybe_async(self.deps_factory, request) if self.deps_factory is not None else None
                answer = await self.answer(request, deps)
        except TimeoutError:
            raise self.fail(f"did not finish within timeout_s={limit:g}s") from None
        except AgentError:
            raise
        except Exception as exc:
            raise self.fail(f"{self.framework} run raised {type(exc).__name__}: {exc}") from exc
        usage = answer.usage
        if usage.model is None and self.settings.model:
            usage = usage.model_copy(update={"model": self.settings.model})
        result = self.run_result(
            request,
            answer.output,
            answer.steps,
            usage=usage,
            raw_events=answer.raw,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        return await self.apply_after(answer.raw, result, silence=f"the {self.framework} run gave no output or step")
