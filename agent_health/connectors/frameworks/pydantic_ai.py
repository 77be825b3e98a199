"""The `pydantic_ai` connector: a pydantic-ai `Agent` named directly (`settings.agent`).

Each run is `await agent.run(prompt, instructions=<the test's context>, deps=...)`: the prompt is
the user prompt, the context the run's additional instructions (pydantic-ai's place for what one
run adds to the system prompt), and `settings.deps` gives `deps`. The run is read from its
messages (`result.all_messages()`): user prompts, text, thinking, tool calls with their arguments,
tool returns and retries, each model response's token usage and model name.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pydantic_ai
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse

from agent_health.connectors.frameworks import Answer, FrameworkConnector, context_text
from agent_health.connectors.parsing import as_text
from agent_health.model import Step, Usage
from agent_health.model.agent import AgentRequest


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(c if isinstance(c, str) else f"[{type(c).__name__}]" for c in content)
    return as_text(content)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump", None)  # a structured output: its JSON
    return json.dumps(dump(mode="json") if callable(dump) else output, ensure_ascii=False, default=str)


def _response_steps(message: Any) -> list[Step]:
    steps: list[Step] = []
    for part in message.parts:
        kind = getattr(part, "part_kind", "")
        if kind == "text":
            steps.append(Step(kind="message", role="assistant", content=part.content))
        elif kind == "thinking":
            if part.content:
                steps.append(Step(kind="thinking", content=part.content))
        elif kind in ("tool-call", "builtin-tool-call"):
            steps.append(
                Step(kind="tool_call", tool=part.tool_name, args=part.args_as_dict(), call_id=part.tool_call_id)
            )
        elif kind == "builtin-tool-return":
            steps.append(
                Step(kind="tool_result", tool=part.tool_name, call_id=part.tool_call_id, content=as_text(part.content))
            )
    usage = getattr(message, "usage", None)
    if steps and usage is not None:  # the response's tokens on its first step, as the other connectors do
        steps[0] = steps[0].model_copy(
            update={"input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0}
        )
    return steps


def _request_steps(message: Any) -> list[Step]:
    steps: list[Step] = []
    for part in message.parts:
        kind = getattr(part, "part_kind", "")
        if kind == "user-prompt":
            steps.append(Step(kind="message", role="user", content=_text(part.content)))
        elif kind == "tool-return":
            failed = str(getattr(part, "outcome", "success")) not in ("success", "")
            steps.append(
                Step(
                    kind="tool_result",
                    tool=part.tool_name,
                    call_id=part.tool_call_id,
                    content=part.model_response_str(),
                    is_error=failed,
                )
            )
        elif kind == "retry-prompt":
            if part.tool_name:  # a tool's error, sent back to the model to retry with
                steps.append(
                    Step(
                        kind="tool_result",
                        tool=part.tool_name,
                        call_id=part.tool_call_id,
                        content=part.model_response(),
                        is_error=True,
                    )
                )
            else:  # the output failed validation: the framework asks the model again
                steps.append(Step(kind="message", role="user", content=part.model_response()))
        # system prompts and instructions are the agent's configuration, not steps of the run
    return steps


def read_messages(messages: list[Any]) -> tuple[list[Step], Usage]:
    """The trajectory and usage of a pydantic-ai run's messages."""
    steps: list[Step] = []
    inp = out = calls = 0
    model: str | None = None
    for message in messages:
        if isinstance(message, ModelResponse):
            steps += _response_steps(message)
            calls += 1
            inp += message.usage.input_tokens or 0
            out += message.usage.output_tokens or 0
            model = message.model_name or model
        elif isinstance(message, ModelRequest):
            steps += _request_steps(message)
    return steps, Usage.of(inp, out, model=model, llm_calls=calls, unreported=calls == 0)


class PydanticAIConnector(FrameworkConnector):
    """A pydantic-ai Agent, run in-process."""

    name = "pydantic_ai"
    framework = "pydantic-ai"
    expected = "a pydantic_ai.Agent"

    def accepts(self, target: Any) -> bool:
        return isinstance(target, pydantic_ai.Agent)

    async def answer(self, request: AgentRequest, deps: Any) -> Answer:
        takes = inspect.signature(self.target.run).parameters
        kwargs: dict[str, Any] = {}
        if request.context:
            kwargs["instructions"] = context_text(request.context)
        if deps is not None:
            kwargs["deps"] = deps
        if "run_id" in takes:  # the run's id on pydantic-ai's own record (and its spans)
            kwargs["run_id"] = request.run_id
        result = await self.target.run(request.prompt, **kwargs)
        messages = result.all_messages()
        steps, usage = read_messages(messages)
        raw = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        return Answer(_output_text(result.output), steps, usage, list(raw))
