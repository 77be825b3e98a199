"""The judge contract: a provider turns one JudgeRequest into one Verdict."""

from __future__ import annotations

import abc
from typing import ClassVar, Protocol

from agent_health.model import Verdict
from agent_health.model.judge import JudgeRequest


class LLM(Protocol):
    """A provider-agnostic completion helper (the `llm` given to custom evaluators and the insight
    synthesizer). Implementations go through the judge cache."""

    async def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> str:
        """One completion; returns the model's text."""
        ...


class JudgeProvider(abc.ABC):
    """Produces a verdict. Raise on provider failure; the service turns it into an errored verdict."""

    name: ClassVar[str] = ""

    @abc.abstractmethod
    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Judge one claim."""

    async def aclose(self) -> None:
        """Release connections."""
