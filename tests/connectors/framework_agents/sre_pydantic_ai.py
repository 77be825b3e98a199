"""An SRE agent built with pydantic-ai, on its offline FunctionModel (both forms: a whole response,
and a stream of deltas for when the agent is streamed, as pydantic-ai's AG-UI adapter does)."""

import itertools
import json
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel


def context_line(messages: list[ModelMessage], info: AgentInfo) -> str:
    """The value under the last `Description:` header the model was given, in its instructions or
    in a user message before the prompt: what the test's context said."""
    parts = [p for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    user = [p.content for p in parts if isinstance(p.content, str)]
    lines = "\n".join([info.instructions or "", *user[:-1]]).splitlines()
    found = [value for header, value in itertools.pairwise(lines) if header.endswith(":") and value.strip()]
    return found[-1] if found else "(none)"


def sre_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(
            parts=[
                ThinkingPart(content="Start from the payment service's logs."),
                ToolCallPart("search_logs", {"service": "payment"}),
            ]
        )
    return ModelResponse(
        parts=[TextPart(f"{returned[0].content} The test's context says: {context_line(messages, info)}")]
    )


async def sre_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[object]:
    """The same answers as deltas; a response streams either thinking, tool calls or text."""
    response = sre_model(messages, info)
    for part in response.parts:
        if isinstance(part, ThinkingPart):
            yield {0: DeltaThinkingPart(content=part.content)}
        elif isinstance(part, ToolCallPart):
            yield {1: DeltaToolCall(name=part.tool_name, json_args=json.dumps(part.args), tool_call_id="call_logs_1")}
        elif isinstance(part, TextPart):
            for word in part.content.split(" "):
                yield word + " "


agent = Agent(
    FunctionModel(sre_model, stream_function=sre_stream, model_name="sre-function-model"),  # type: ignore[arg-type]
    instructions="You are an SRE.",
)


@agent.tool_plain
def search_logs(service: str) -> str:
    """Search one service's logs."""
    return f"The {service} service cannot reach its database."
