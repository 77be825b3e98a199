"""What the real connectors share: validated settings, secrets, hooks, errors and result scrubbing."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_health.config.secrets import SecretSet, register_log_secrets, resolve_env_refs
from agent_health.connectors.base import Connector
from agent_health.errors import AgentError, ConfigError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest, ResolvedAgent
from agent_health.model.limits import Timeout
from agent_health.model.run import text_over
from agent_health.offloop import run_off_loop

S = TypeVar("S", bound="ConnectorSettings")


class ConnectorSettings(BaseModel):
    """Settings every real connector accepts (besides its own)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    root: str = Field(".", description="Folder relative paths (cwd, modules) resolve from; the project root.")
    timeout_s: Timeout = Field(300.0, description="Per-run timeout, including retries.")
    before_request: Any = Field(
        None,
        description="Hook (callable or 'module:function') that may change "
        "the outgoing request: fn(request_dict, agent_request).",
    )
    after_response: Any = Field(
        None, description="Hook that reads the raw response: fn(raw, result) -> RunResult | None."
    )
    model: str | None = Field(None, description="Model name, reported in usage and sent when the agent takes one.")
    description: str | None = None
    service_name: str | None = Field(
        None,
        description="The agent's OpenTelemetry service name: traces find its spans by it in the run's time "
        "window when no run or trace id matches (see docs/traces.md).",
    )


def import_attribute(spec: str, setting: str, root: str = ".") -> Any:
    """The object named by 'module:attribute' (a dotted attribute path; the module imported with
    `root` first on sys.path); a ConfigError naming the setting when it cannot be had."""
    if ":" not in spec:
        raise ConfigError(f"setting {setting}: expected 'module:attribute', got {spec!r}")
    module_name, _, attr = spec.partition(":")
    root_path = str(Path(root).resolve())
    if root_path not in sys.path:
        sys.path.insert(0, root_path)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(f"setting {setting}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"setting {setting}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_callable(spec: object, setting: str, root: str = ".") -> Callable[..., Any] | None:
    """A callable from a callable or a 'module:function' string (imported with `root` on sys.path)."""
    if spec is None or callable(spec):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"setting {setting}: expected a callable or 'module:function', got {spec!r}")
    fn: object = import_attribute(spec, setting, root)
    if not callable(fn):
        raise ConfigError(f"setting {setting}: {spec!r} is not callable")
    return fn


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def answered(result: RunResult) -> bool:
    """Whether a run holds anything the agent answered: output text, a message of its own with
    text, or a tool call or result (a test may check only those). Thinking alone is no answer,
    nor the user's prompt the trajectory opens with."""
    if result.output.strip():
        return True
    return any(
        s.kind in ("tool_call", "tool_result") or (s.kind == "message" and s.role != "user" and s.content.strip())
        for s in result.trajectory
    )


def shown(value: Any, n: int = 80) -> str:
    """A short, single-line picture of a value an agent gave, for error messages."""
    text = " ".join(repr(value).split())
    return text if len(text) <= n else text[:n] + "..."


class RealConnector(Connector):
    """Base of the http/agui/subprocess/python connectors.

    Resolves env-var references once (collecting the secrets), validates settings into
    `settings_model` with errors that name the setting, and offers `fail()` to raise the
    AgentError every failure must become.
    """

    settings_model: ClassVar[type[ConnectorSettings]] = ConnectorSettings

    def __init__(self, agent: ResolvedAgent):
        super().__init__(agent)
        self.secrets = SecretSet()
        where = f"agents.{agent.key}"
        resolved = resolve_env_refs(dict(agent.settings), f"{where}.settings", self.secrets)
        try:
            self.settings = self.settings_model.model_validate(resolved)
        except ValidationError as exc:
            raise ConfigError(
                f"agent {agent.ref}: invalid settings: "
                + "; ".join(
                    f"{where}.settings.{'.'.join(str(p) for p in e['loc'])}: " + e["msg"].removeprefix("Value error, ")
                    for e in exc.errors()
                )
            ) from None
        register_log_secrets(self.secrets)
        self.before_request = load_callable(
            self.settings.before_request, f"{where}.settings.before_request", self.settings.root
        )
        self.after_response = load_callable(
            self.settings.after_response, f"{where}.settings.after_response", self.settings.root
        )

    def fail(self, what: str) -> AgentError:
        """The AgentError for a failure: names the agent, the endpoint and what went wrong."""
        return AgentError(self.secrets.scrub_text(f"agent {self.agent.ref} ({self.endpoint}): {what}"))

    def run_timeout(self, request: AgentRequest) -> float:
        """The per-run limit: the connector's, capped by the test's own timeout when smaller."""
        t = self.settings.timeout_s
        return min(t, request.timeout_s) if request.timeout_s else t

    async def apply_before(self, outgoing: dict[str, Any], request: AgentRequest) -> dict[str, Any]:
        if self.before_request is None:
            return outgoing
        try:
            changed = await call_maybe_async(self.before_request, outgoing, request)
        except Exception as exc:
            raise self.fail(f"before_request hook failed: {type(exc).__name__}: {exc}") from exc
        return changed if isinstance(changed, dict) else outgoing

    async def apply_after(self, raw: Any, result: RunResult, *, silence: str | Callable[[], str]) -> RunResult:
        """The result after the after_response hook, secrets scrubbed. A run with no answer at all
        (see `answered`) is an error naming `silence`, what the agent gave instead: an empty
        answer is a failure of the agent, never a failed test scored zero. `silence` may be a
        function giving that text, called only then (a picture of the answer costs a `repr` of
        it, about 3 us a run that nearly every run would throw away)."""
        if self.after_response is not None:
            try:
                changed = await call_maybe_async(self.after_response, raw, result)
            except Exception as exc:
                raise self.fail(f"after_response hook failed: {type(exc).__name__}: {exc}") from exc
            if isinstance(changed, RunResult):
                result = changed
        if not answered(result):
            raise self.fail(f"no answer: {silence() if callable(silence) else silence}")
        if text_over([result]):  # megabytes of text: scrubbed in a worker thread, never stopping the loop
            return await run_off_loop(self.secrets.scrub_model, result, piecewise=True)  # type: ignore[no-any-return]
        return self.scrub(result)

    def scrub(self, result: RunResult) -> RunResult:
        """The result with every known secret removed (raw events, output, steps)."""
        return self.secrets.scrub_model(result)
