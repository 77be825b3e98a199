"""An SRE agent built with LangGraph: a model node and a tool node over the messages state, its
model a fake chat model with tool calls (what langchain-core's fake models do, deciding from the
conversation so that any number of runs can share it)."""

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


class SREChatModel(BaseChatModel):
    """Calls search_logs first, then answers with what it returned and the context it was given."""

    @property
    def _llm_type(self) -> str:
        return "sre-fake-chat"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        meta = {"model_name": "sre-fake-chat"}
        if not results:
            message = AIMessage(
                content=[{"type": "reasoning", "reasoning": "Start from the payment service's logs."}],
                tool_calls=[{"name": "search_logs", "args": {"service": "payment"}, "id": "call_logs_1"}],
                usage_metadata={"input_tokens": 50, "output_tokens": 12, "total_tokens": 62},
                response_metadata=meta,
            )
        else:
            context = [m.content for m in messages if isinstance(m, SystemMessage)]
            last_line = str(context[-1]).strip().splitlines()[-1] if context else "(none)"
            message = AIMessage(
                content=f"{results[-1].content} The test's context says: {last_line}",
                usage_metadata={"input_tokens": 70, "output_tokens": 25, "total_tokens": 95},
                response_metadata=meta,
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def search_logs(service: str) -> str:
    """Search one service's logs."""
    return f"The {service} service cannot reach its database."


model = SREChatModel()


def call_model(state: MessagesState) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", call_model)
builder.add_node("tools", ToolNode([search_logs]))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "agent")
graph = builder.compile()


# A LangChain runnable that is no graph: a prompt template piped into the model.
chain = ChatPromptTemplate.from_messages([("human", "{question}")]) | model
