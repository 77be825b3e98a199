"""The judge provider registry: `judge.provider` and `judge.providers[...].type` name a kind here.

A kind's target is either a `judges.chat.ChatClient` subclass (an LLM: the judge service wraps it in
the prompt, answer parsing and cache of `llm_judge.LLMJudge`), built as `cls(model, settings,
backoff, no_structured=...)`, or a `judges.base.JudgeProvider` subclass that gives verdicts itself,
built as `cls(model, settings)`. Third-party kinds come from the `agent_health.judges` entry points.
"""

from agent_health.registry import Registry

REGISTRY = Registry(
    "judge provider",
    "agent_health.judges",
    {
        "demo": "agent_health.judges.demo:DemoJudge",
        "openai": "agent_health.judges.openai:OpenAIChat",
        "bedrock": "agent_health.judges.bedrock:BedrockChat",
    },
)

__all__ = ["REGISTRY"]
