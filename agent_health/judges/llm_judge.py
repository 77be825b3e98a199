"""The LLM judge: contextual mode (one call) and agentic mode (`tools=["trace_query"]`), over any
`ChatClient`, with verdicts cached by content."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_health.config.fingerprints import digest
from agent_health.judges.agentic import AGENTIC_NOTE, TOOL_PACKS, run_agentic
from agent_health.judges.base import JudgeProvider
from agent_health.judges.cache import JudgeCache, cache_key
from agent_health.judges.canonical import canonical_run, gather_traces
from agent_health.judges.chat import ChatClient, ChatMessage
from agent_health.judges.identity import client_identity
from agent_health.judges.parse import VERDICT_ANSWER, ask_json, verdict_answer
from agent_health.judges.prompt import PROMPT_VERSION, SYSTEM, VERDICT_FORMAT, PromptLimits, build_prompt
from agent_health.model import JudgeIdentity, Usage, Verdict
from agent_health.model.judge import JudgeRequest

CONTEXT_ITEMS = ("output", "trajectory", "traces", "logs")


def check_request(request: JudgeRequest) -> None:
    """Reject context items and tools nobody knows, naming them."""
    unknown = [c for c in request.context if c not in CONTEXT_ITEMS]
    if unknown:
        raise ValueError(f"judge context {unknown} unknown; use any of {list(CONTEXT_ITEMS)}")
    bad_tools = [t for t in request.tools if t not in TOOL_PACKS]
    if bad_tools:
        raise ValueError(f"judge tools {bad_tools} unknown; available: {sorted(TOOL_PACKS)}")


class LLMJudge(JudgeProvider):
    """Judges one claim with a model. Raises on failure (the service makes it an errored verdict)."""

    def __init__(
        self,
        client: ChatClient,
        *,
        limits: PromptLimits | None = None,
        max_tool_steps: int = 6,
        cache: JudgeCache | None = None,
    ):
        self.client = client
        self.name = client.provider  # type: ignore[misc]
        self.limits = limits or PromptLimits()
        self.max_tool_steps = max_tool_steps
        self.cache = cache
        # the judge's definition: its prompt template and limits (agentic mode adds its tool note)
        definition = {"system": SYSTEM, "format": VERDICT_FORMAT, "limits": self.limits.model_dump()}
        self._definitions = {
            False: digest(definition),
            True: digest({**definition, "agentic": AGENTIC_NOTE, "max_tool_steps": max_tool_steps}),
        }

    def describe(self, request: JudgeRequest, key: str | None = None) -> JudgeIdentity:
        """Who judges `request`: this client's model, the built-in evaluator, its definition (and
        the verdict's cache key, once known)."""
        agentic = bool(request.tools)
        return client_identity(
            self.client,
            evaluator=f"builtin:{'agentic' if agentic else 'contextual'}",
            kind="llm",
            definition_hash=self._definitions[agentic],
            prompt_version=PROMPT_VERSION,
            cache_keys=(key,) if key else (),
        )

    def key(self, request: JudgeRequest, content: dict[str, Any], traces: dict[str, Any]) -> str:
        """What makes two judgements the same: evaluator, provider, model, criteria, context
        selection, tools, prompt version and limits, and the canonical run (and trace) content."""
        return cache_key(
            kind="verdict",
            evaluator=f"builtin:{'agentic' if request.tools else 'contextual'}",
            provider=self.client.provider,
            endpoint=self.client.identity,
            model=self.client.model,
            criteria=request.criteria,
            context=sorted(request.context),
            tools=sorted(request.tools),
            prompt=PROMPT_VERSION,
            limits=self.limits.model_dump(),
            max_tool_steps=self.max_tool_steps if request.tools else None,
            content=content,
            traces=traces,
        )

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        check_request(request)
        content = canonical_run(request)
        traces = await gather_traces(request)
        key = self.key(request, content, traces)
        if self.cache is not None:
            hit = await asyncio.to_thread(self.cache.get, key)  # SQLite or a shared store: off the loop
            if hit is not None:
                # A hit costs nothing now: tokens are not counted again (the original usage stays in details).
                verdict = Verdict.model_validate(hit)
                hit_details = {**verdict.details, "cached_usage": verdict.usage.model_dump()}
                return verdict.model_copy(
                    update={
                        "cached": True,
                        "role": request.role,
                        "criteria": request.criteria,
                        "usage": Usage(model=verdict.usage.model),
                        "details": hit_details,
                        "identity": self.describe(request, key),
                    }
                )
        started = time.perf_counter()
        prompt = build_prompt(request.criteria, content, traces, request.context, self.limits)
        details: dict[str, Any] = {"mode": "contextual", "prompt_nonce": prompt.nonce}
        if request.tools:
            answer, usage, calls = await run_agentic(
                self.client, prompt, request.trace_tools, self.limits, self.max_tool_steps
            )
            details.update(mode="agentic", tool_calls=calls)
        else:
            answer, usage = await ask_json(
                self.client,
                [ChatMessage(role="user", content=prompt.user)],
                system=SYSTEM,
                answer_format=prompt.answer_format,
                validate=lambda text: verdict_answer(text, prompt.nonce),
                schema=VERDICT_ANSWER,
            )
        details["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
        verdict = Verdict(
            passed=answer["passed"],
            score=answer["score"],
            reasoning=answer["reasoning"],
            criteria=request.criteria,
            role=request.role,
            evaluator=self.client.provider,
            model=self.client.model,
            usage=usage.model_copy(update={"model": self.client.model}),
            details=details,
            identity=self.describe(request, key),
        )
        if self.cache is not None:
            # off the event loop: a write may wait on another process's write lock (busy timeout)
            await asyncio.to_thread(self.cache.put, key, "verdict", verdict.model_dump(mode="json"))
        return verdict

    async def aclose(self) -> None:
        await self.client.aclose()
