"""The judge service: picks a provider, applies skip mode and the judge concurrency limit, and
turns every failure into an errored verdict, so `judge()` never raises."""

from __future__ import annotations

import asyncio
from typing import Callable

from agent_health.judges.base import JudgeProvider, JudgeRequest
from agent_health.model import Verdict

ProviderFactory = Callable[[JudgeRequest], JudgeProvider]


class JudgeService:
    """Shared by the tests of one engine run."""

    def __init__(self, provider: JudgeProvider | None = None, *, skip: bool = False, concurrency: int = 8,
                 select: ProviderFactory | None = None):
        from agent_health.judges.demo import DemoJudge

        self.provider = provider or DemoJudge()
        self.skip = skip
        self._select = select
        self._limit = asyncio.Semaphore(max(1, concurrency))

    async def judge(self, request: JudgeRequest, *, skip: bool = False) -> Verdict:
        if self.skip or skip:
            return Verdict(passed=True, score=None, skipped=True, criteria=request.criteria, role=request.role,
                           reasoning="judge skipped (skip mode)", evaluator="skipped")
        provider = self._select(request) if self._select else self.provider
        try:
            async with self._limit:
                verdict = await provider.evaluate(request)
        except Exception as exc:  # provider failure: errored, never a silent pass or zero
            return Verdict(passed=False, errored=True, criteria=request.criteria, role=request.role,
                           error=f"{provider.name or type(provider).__name__} judge failed: "
                                 f"{type(exc).__name__}: {exc}", evaluator=provider.name or "judge")
        if verdict.role != request.role:
            verdict = verdict.model_copy(update={"role": request.role})
        return verdict

    async def aclose(self) -> None:
        await self.provider.aclose()
