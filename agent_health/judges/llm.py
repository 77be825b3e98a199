"""The `llm` helper given to custom and rubric evaluators (and usable by the insight synthesizer):
the `LLM` protocol over a judge provider, through the judge cache."""

from __future__ import annotations

import asyncio

from agent_health.judges.base import LLM
from agent_health.judges.cache import JudgeCache, cache_key
from agent_health.judges.chat import AnswerCutOff, AnswerSchema, ChatClient, ChatMessage, ProviderError
from agent_health.model import Usage


class CachedLLM(LLM):
    """Single-turn completions keyed by provider, model, system and prompt.

    Counts what it did, so a verdict built on it can report its tokens and whether it was served
    entirely from the cache.
    """

    def __init__(self, client: ChatClient | None, cache: JudgeCache | None = None, *, unavailable: str = ""):
        self.client = client
        self.cache = cache
        self.unavailable = unavailable or "no LLM judge provider is configured"
        self.usage = Usage()
        self.calls = 0
        self.hits = 0
        self.keys: list[str] = []  # cache keys of its completions, in order (the verdict's provenance)

    @property
    def model(self) -> str | None:
        return self.client.model if self.client else None

    async def complete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False, schema: AnswerSchema | None = None
    ) -> str:
        """One completion; a cache hit returns the stored text and makes no call. Raises
        `AnswerCutOff` when the model stopped at its length limit."""
        if self.client is None:
            raise ProviderError(f"llm helper: {self.unavailable}")
        key = cache_key(
            kind="completion",
            provider=self.client.provider,
            endpoint=self.client.identity,
            model=self.client.model,
            system=system,
            prompt=prompt,
            json_mode=json_mode,
            schema=dict(schema.schema) if schema else None,
        )
        self.keys.append(key)
        if self.cache is not None:
            hit = await asyncio.to_thread(self.cache.get, key)  # SQLite or a shared store: off the loop
            if hit is not None and isinstance(text := hit.get("text"), str):
                self.hits += 1
                return text
        response = await self.client.chat(
            [ChatMessage(role="user", content=prompt)], system=system, json_mode=json_mode, schema=schema
        )
        self.calls += 1
        self.usage = self.usage + response.usage
        if response.cut_off:  # a fragment: never cached, never taken for the answer
            raise AnswerCutOff(response, self.client.label)
        if self.cache is not None:
            await asyncio.to_thread(self.cache.put, key, "completion", {"text": response.text, "model": response.model})
        return response.text

    @property
    def served_from_cache(self) -> bool:
        return self.calls == 0 and self.hits > 0
