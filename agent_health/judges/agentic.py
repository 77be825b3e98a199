"""Agentic judging: the model may call read-only, run-scoped trace tools (`RunTraceTools`) through
its provider's tool calling, in a bounded loop, before giving its verdict.

Tool results go back fenced as untrusted data. A tool that fails is reported to the model as a
failed tool call (the model can try something else); the loop ends after `max_steps` model turns,
when the model is asked for its verdict without tools.
"""

from __future__ import annotations

import json
from typing import Any

from agent_health.judges.chat import ChatClient, ChatMessage, ChatResponse, ToolCall, ToolSpec
from agent_health.judges.parse import VERDICT_ANSWER, ask_json, verdict_answer
from agent_health.judges.prompt import JudgePrompt, PromptLimits, fence, truncate
from agent_health.model import Usage
from agent_health.traces.tools import RunTraceTools

TRACE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="get_spans",
        description="All trace spans of the run being judged (name, attributes, status, timing). Read-only.",
    ),
    ToolSpec(name="get_logs", description="All log records of the run being judged. Read-only."),
    ToolSpec(name="metrics", description="Token, cost, duration and call rollups of the run's spans."),
    ToolSpec(
        name="query",
        description="A read-only OpenSearch-style query DSL search, always restricted to "
        "the run being judged. Scripts and writes are rejected.",
        parameters={
            "type": "object",
            "properties": {
                "dsl": {
                    "type": "object",
                    "description": 'Query DSL, e.g. {"query": {"match": {"name": "search_logs"}}}',
                }
            },
            "required": ["dsl"],
        },
    ),
)
TOOL_PACKS = {"trace_query": TRACE_TOOLS}

AGENTIC_NOTE = (
    "\n\nYou may call the trace tools (get_spans, get_logs, metrics, query) to inspect this run's "
    "trace data before answering. When you have enough evidence, reply with the JSON verdict "
    "and no tool call."
)
BUDGET_SPENT = "Your tool budget is spent. Give your verdict now from the evidence you have.\n"


async def invoke(tools: RunTraceTools, call: ToolCall) -> Any:
    """Run one tool call against the run-scoped tools."""
    if call.name == "get_spans":
        return await tools.get_spans()
    if call.name == "get_logs":
        return await tools.get_logs()
    if call.name == "metrics":
        return await tools.metrics()
    if call.name == "query":
        dsl = call.args.get("dsl", call.args)
        if not isinstance(dsl, dict):
            raise ValueError("query needs a `dsl` object")
        return await tools.query(dsl)
    raise ValueError(f"unknown tool {call.name!r}; available: get_spans, get_logs, metrics, query")


async def run_agentic(
    client: ChatClient, prompt: JudgePrompt, tools: RunTraceTools, limits: PromptLimits, max_steps: int
) -> tuple[dict[str, Any], Usage, list[dict[str, Any]]]:
    """The bounded tool loop; returns (parsed verdict answer, usage, tool-call log)."""
    system = prompt.system + AGENTIC_NOTE
    messages = [ChatMessage(role="user", content=prompt.user)]
    usage = Usage()
    log: list[dict[str, Any]] = []

    async def verdict(first: ChatResponse | None = None) -> tuple[dict[str, Any], Usage]:
        return await ask_json(
            client,
            messages,
            system=system,
            answer_format=prompt.answer_format,
            validate=lambda text: verdict_answer(text, prompt.nonce),
            first=first,
            tools=TRACE_TOOLS,
            schema=VERDICT_ANSWER,
        )

    for _ in range(max(1, max_steps)):
        response = await client.chat(messages, system=system, tools=TRACE_TOOLS, schema=VERDICT_ANSWER)
        if not response.tool_calls:
            answer, more = await verdict(first=response)
            return answer, usage + more, log
        usage = usage + response.usage
        messages.append(ChatMessage(role="assistant", content=response.text, tool_calls=response.tool_calls))
        for call in response.tool_calls:
            entry: dict[str, Any] = {"tool": call.name, "args": call.args}
            try:
                result = await invoke(tools, call)
                text = json.dumps(result, sort_keys=True, default=str)
                entry.update(ok=True, result_chars=len(text), records=len(result) if isinstance(result, list) else None)
                is_error = False
            except Exception as exc:  # reported to the model, which may try another way  # noqa: BLE001
                text = f"tool failed: {type(exc).__name__}: {exc}"
                entry.update(ok=False, error=text)
                is_error = True
            log.append(entry)
            body = fence("TOOL_RESULT", truncate(text, limits.max_trace_chars), prompt.nonce)
            messages.append(ChatMessage(role="tool", content=body, tool_call_id=call.id, is_error=is_error))
    messages.append(ChatMessage(role="user", content=BUDGET_SPENT + prompt.answer_format))
    answer, more = await verdict()
    return answer, usage + more, log
