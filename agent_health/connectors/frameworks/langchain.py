"""The `langgraph` (or `langchain`) connector: a LangGraph compiled graph or any LangChain runnable
named directly (`settings.agent`).

Each run is `await runnable.ainvoke(input, config={"callbacks": [recorder], ...})`. The input is
the conversation: a system message with the test's context (when it has one), then the prompt as
the user's message; a graph whose state has `messages` gets `{"messages": [...]}`, a chat model the
list itself, and any other runnable `{"messages": [...]}` or, with `settings.input_key`,
`{input_key: <the prompt, then the context>}`. `settings.deps` gives a graph's runtime `context`.

The run is read through LangChain's callbacks, the public hook every runnable calls: each chat
model call's message (its reasoning, text and tool calls with their arguments, `usage_metadata`,
the model in `response_metadata`) and each tool's result or error, in the order they happened,
sub-graphs and nested agents included. The answer is the last AI message of the graph's
`messages` (or the runnable's output as text).
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from pydantic import Field

from agent_health.connectors.frameworks import Answer, FrameworkConnector, FrameworkSettings, context_text
from agent_health.connectors.parsing import as_text
from agent_health.model import Step, Usage
from agent_health.model.agent import AgentRequest


class LangChainSettings(FrameworkSettings):
    input_key: str | None = Field(
        None, description="For a runnable that takes a dict of text: the key of the prompt (with the context)."
    )


def message_text(message: BaseMessage) -> str:
    """The text of a message: its text content blocks joined."""
    if isinstance(message.content, str):
        return message.content
    return "".join(str(b.get("text", "")) for b in blocks(message) if b.get("type") == "text")


def blocks(message: BaseMessage) -> list[dict[str, Any]]:
    """A message's standard content blocks (text, reasoning, tool calls, ...) as plain dicts."""
    return [cast(dict[str, Any], b) for b in message.content_blocks]


def _model_of(message: BaseMessage) -> str | None:
    meta = message.response_metadata or {}
    name = meta.get("model_name") or meta.get("model") or meta.get("model_id")
    return str(name) if name else None


class Recorder(BaseCallbackHandler):
    """What a run's callbacks report, in order: model outputs and tool results, usage, model."""

    run_inline = True  # called in order, on the run's own thread or loop

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[Step] = []
        self.raw: list[dict[str, Any]] = []
        self.input_tokens = self.output_tokens = self.calls = 0
        self.counted = False
        self.model: str | None = None
        self.tools: dict[uuid.UUID, tuple[str | None, str | None]] = {}  # callback run id -> (tool, call id)

    def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:
        meta = kw.get("metadata") or {}
        params = kw.get("invocation_params") or {}
        name = meta.get("ls_model_name") or params.get("model") or params.get("model_name")
        with self.lock:
            self.model = str(name) if name else self.model

    def on_llm_end(self, response: Any, **kw: Any) -> None:
        with self.lock:
            counted = False
            for generations in response.generations:
                for generation in generations:
                    message = getattr(generation, "message", None)
                    if isinstance(message, BaseMessage):
                        counted = self._model_message(message) or counted
                    elif getattr(generation, "text", ""):
                        self.steps.append(Step(kind="message", role="assistant", content=generation.text))
            llm_output = response.llm_output or {}
            if not counted and isinstance(llm_output.get("token_usage"), dict):  # providers that report it there
                usage = llm_output["token_usage"]
                self.input_tokens += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
                self.output_tokens += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
                self.counted = True
            if llm_output.get("model_name"):
                self.model = str(llm_output["model_name"])
            self.calls += 1

    def _model_message(self, message: BaseMessage) -> bool:
        """Steps of one model output message; whether it carried its token usage."""
        first = len(self.steps)
        for block in blocks(message):
            kind = block.get("type")
            if kind == "reasoning" and block.get("reasoning"):
                self.steps.append(Step(kind="thinking", content=str(block["reasoning"])))
            elif kind == "text" and block.get("text"):
                self.steps.append(Step(kind="message", role="assistant", content=str(block["text"])))
            elif kind == "tool_call":
                args = dict(block.get("args") or {})
                self.steps.append(Step(kind="tool_call", tool=block.get("name"), args=args, call_id=block.get("id")))
        self.model = _model_of(message) or self.model
        self.raw.append({"model_output": message.model_dump(mode="json", exclude_none=True)})
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        if not usage:
            return False
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        self.counted = True
        if len(self.steps) > first:
            self.steps[first] = self.steps[first].model_copy(
                update={"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens")}
            )
        return True

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: uuid.UUID, **kw: Any) -> None:
        name = kw.get("name") or (serialized or {}).get("name")
        with self.lock:
            self.tools[run_id] = (name, kw.get("tool_call_id"))

    def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kw: Any) -> None:
        with self.lock:
            name, call_id = self.tools.pop(run_id, (None, None))
            if isinstance(output, ToolMessage):
                self.steps.append(
                    Step(
                        kind="tool_result",
                        tool=output.name or name,
                        call_id=output.tool_call_id or call_id,
                        content=message_text(output) if output.content else "",
                        is_error=output.status == "error",
                    )
                )
            else:
                content = output if isinstance(output, str) else as_text(output)
                self.steps.append(Step(kind="tool_result", tool=name, call_id=call_id, content=content))
            self.raw.append({"tool_result": self.steps[-1].model_dump(mode="json", exclude_none=True)})

    def on_tool_error(self, error: BaseException, *, run_id: uuid.UUID, **kw: Any) -> None:
        with self.lock:
            name, call_id = self.tools.pop(run_id, (None, None))
            content = f"{type(error).__name__}: {error}"
            self.steps.append(Step(kind="tool_result", tool=name, call_id=call_id, content=content, is_error=True))
            self.raw.append({"tool_error": self.steps[-1].model_dump(mode="json", exclude_none=True)})

    def usage(self) -> Usage:
        return Usage.of(
            self.input_tokens, self.output_tokens, model=self.model, llm_calls=self.calls, unreported=not self.counted
        )


def output_text(value: Any) -> str:
    """The answer in what a runnable returned: a graph state's last AI message, a message, text."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        for message in reversed(value["messages"]):
            if isinstance(message, AIMessage):
                return message_text(message)
        return ""
    if isinstance(value, BaseMessage):
        return message_text(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class LangChainConnector(FrameworkConnector):
    """A LangGraph graph or LangChain runnable, run in-process."""

    name = "langgraph"
    framework = "LangChain"
    expected = "a LangGraph graph or LangChain runnable"
    settings_model = LangChainSettings
    settings: LangChainSettings

    def accepts(self, target: Any) -> bool:
        return isinstance(target, Runnable)

    def _input(self, request: AgentRequest) -> Any:
        if self.settings.input_key:
            text = request.prompt + ("\n\n" + context_text(request.context) if request.context else "")
            return {self.settings.input_key: text}
        messages: list[BaseMessage] = [SystemMessage(context_text(request.context))] if request.context else []
        messages.append(HumanMessage(request.prompt))
        if isinstance(self.target, BaseLanguageModel):
            return messages
        return {"messages": messages}

    async def answer(self, request: AgentRequest, deps: Any) -> Answer:
        recorder = Recorder()
        config: dict[str, Any] = {"callbacks": [recorder], "metadata": {"agent_health.run.id": request.run_id}}
        try:
            config["run_id"] = uuid.UUID(hex=request.run_id)  # LangSmith and tracers see the run's own id
        except ValueError:
            pass
        kwargs: dict[str, Any] = {"context": deps} if deps is not None else {}
        value = await self.target.ainvoke(self._input(request), config, **kwargs)
        steps = [Step(kind="message", role="user", content=request.prompt), *recorder.steps]
        output = output_text(value)
        if not output:
            output = next((s.content for s in reversed(recorder.steps) if s.kind == "message"), "")
        return Answer(output, steps, recorder.usage(), recorder.raw)
