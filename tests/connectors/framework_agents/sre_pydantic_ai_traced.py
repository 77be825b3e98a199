"""The pydantic-ai SRE agent with pydantic-ai's own OpenTelemetry instrumentation on: its spans go to
whatever tracer provider the process has, as pydantic-evals and Logfire read them."""

from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.function import FunctionModel

from tests.connectors.framework_agents.sre_pydantic_ai import search_logs, sre_model

agent = Agent(
    FunctionModel(sre_model, model_name="sre-function-model"),
    instructions="You are an SRE.",
    capabilities=[Instrumentation()],
)
agent.tool_plain(search_logs)
