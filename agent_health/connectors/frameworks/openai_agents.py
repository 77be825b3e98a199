"""The `openai_agents` connector: an OpenAI Agents SDK `Agent` named directly (`settings.agent`).

Each run is `await Runner.run(agent, input, context=..., max_turns=..., run_config=...)`. The input
is the conversation: a `developer` message with the test's context (when it has one), then the
prompt as the user's message; `settings.deps` gives the run's local `context` (what the agent's
tools and instructions read). The run is read from its items (`result.new_items`): messages,
reasoning, tool and handoff calls with their arguments and their outputs; usage from
`result.context_wrapper.usage`, the model from the agent that answered last.

The SDK's own tracing (which exports to OpenAI's platform) is off for these runs unless
`settings.sdk_tracing` is true.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, RunConfig, Runner
from agents.items import (
    HandoffCallItem,
    HandoffOutputItem,
    ItemHelpers,
    MessageOutputItem,
    ReasoningItem,
    ToolCallItem,
    ToolCallOutputItem,
)
from pydantic import Field

from agent_health.connectors.frameworks import Answer, FrameworkConnector, FrameworkSettings, context_text
from agent_health.connectors.parsing import as_text, parse_args
from agent_health.model import Step, Usage
from agent_health.model.agent import AgentRequest


class OpenAIAgentsSettings(FrameworkSettings):
    max_turns: int = Field(10, ge=1, le=1000, description="The SDK's max_turns for one run.")
    sdk_tracing: bool = Field(False, description="Keep the Agents SDK's own tracing (its exporters) on.")


def model_name(agent: Any) -> str | None:
    """The name of an agent's model: the string it was given, or its model object's `model`."""
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model or None
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _raw(item: Any) -> Any:
    raw = item.raw_item
    dump = getattr(raw, "model_dump", None)
    return {"type": item.type, "raw_item": dump(mode="json", exclude_none=True) if callable(dump) else raw}


def read_items(items: list[Any]) -> list[Step]:
    """The steps of a run's items, in order."""
    steps: list[Step] = []
    names: dict[str, str] = {}  # call id -> tool name
    for item in items:
        raw = item.raw_item
        if isinstance(item, MessageOutputItem):
            steps.append(Step(kind="message", role="assistant", content=ItemHelpers.text_message_output(item)))
        elif isinstance(item, ReasoningItem):
            parts = [_field(s, "text") for s in (_field(raw, "summary") or [])]
            parts += [_field(c, "text") for c in (_field(raw, "content") or [])]
            text = "\n".join(p for p in parts if p)
            if text:
                steps.append(Step(kind="thinking", content=text))
        elif isinstance(item, (ToolCallItem, HandoffCallItem)):
            name = _field(raw, "name") or _field(raw, "type")
            call_id = _field(raw, "call_id") or _field(raw, "id")
            if call_id and name:
                names[str(call_id)] = str(name)
            steps.append(Step(kind="tool_call", tool=name, args=parse_args(_field(raw, "arguments")), call_id=call_id))
        elif isinstance(item, (ToolCallOutputItem, HandoffOutputItem)):
            call_id = _field(raw, "call_id")
            output = getattr(item, "output", None)
            content = as_text(output if output is not None else _field(raw, "output"))
            steps.append(Step(kind="tool_result", tool=names.get(str(call_id)), call_id=call_id, content=content))
    return steps


class OpenAIAgentsConnector(FrameworkConnector):
    """An OpenAI Agents SDK Agent, run in-process."""

    name = "openai_agents"
    framework = "OpenAI Agents SDK"
    expected = "an agents.Agent (the OpenAI Agents SDK's)"
    settings_model = OpenAIAgentsSettings
    settings: OpenAIAgentsSettings

    def accepts(self, target: Any) -> bool:
        return isinstance(target, Agent)

    async def answer(self, request: AgentRequest, deps: Any) -> Answer:
        items: list[Any] = []
        if request.context:
            items.append({"role": "developer", "content": context_text(request.context)})
        items.append({"role": "user", "content": request.prompt})
        run_config = RunConfig(tracing_disabled=not self.settings.sdk_tracing, group_id=request.run_id)
        result = await Runner.run(
            self.target, items, context=deps, max_turns=self.settings.max_turns, run_config=run_config
        )
        steps = [Step(kind="message", role="user", content=request.prompt), *read_items(result.new_items)]
        sdk_usage = result.context_wrapper.usage
        usage = Usage.of(
            sdk_usage.input_tokens,
            sdk_usage.output_tokens,
            model=model_name(result.last_agent) or model_name(self.target),
            llm_calls=sdk_usage.requests,
            unreported=not (sdk_usage.input_tokens or sdk_usage.output_tokens),
        )
        output = result.final_output
        text = output if isinstance(output, str) else as_text(getattr(output, "model_dump", lambda: output)())
        return Answer(text, steps, usage, [_raw(item) for item in result.new_items])
