"""An SRE agent built with the OpenAI Agents SDK, its model an OpenAI-compatible chat completions
endpoint at $SRE_OPENAI_BASE_URL (the tests' local one on 127.0.0.1)."""

import os

from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI


@function_tool
def search_logs(service: str) -> str:
    """Search one service's logs."""
    return f"The {service} service cannot reach its database."


client = AsyncOpenAI(base_url=os.environ["SRE_OPENAI_BASE_URL"], api_key="local-test-key", max_retries=0)
agent = Agent(
    name="sre",
    instructions="You are an SRE.",
    model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    tools=[search_logs],
)
