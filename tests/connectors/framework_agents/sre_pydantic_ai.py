"""An SRE agent built with pydantic-ai, on its offline FunctionModel."""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def sre_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(
            parts=[
                ThinkingPart(content="Start from the payment service's logs."),
                ToolCallPart("search_logs", {"service": "payment"}),
            ]
        )
    context = (info.instructions or "").strip().splitlines()
    return ModelResponse(parts=[TextPart(f"{returned[0].content} The test's context says: {context[-1]}")])


agent = Agent(FunctionModel(sre_model, model_name="sre-function-model"), instructions="You are an SRE.")


@agent.tool_plain
def search_logs(service: str) -> str:
    """Search one service's logs."""
    return f"The {service} service cannot reach its database."
