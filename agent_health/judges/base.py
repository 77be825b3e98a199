"""The judge contract: a provider turns one JudgeRequest into one Verdict."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar, Protocol

from agent_health.model import JudgeIdentity, Verdict
from agent_health.model.judge import JudgeRequest

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.judges.chat import AnswerSchema


class LLM(Protocol):
    """A provider-agnostic completion helper (the `llm` given to custom evaluators and the insight
    synthesizer). Implementations go through the judge cache."""

    async def complete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False, schema: AnswerSchema | None = None
    ) -> str:
        """One completion; returns the model's text (`schema`: ask for a structured answer).
        Raises `agent_health.judges.chat.AnswerCutOff` when the model stopped at its length limit."""
        ...


class JudgeProvider(abc.ABC):
    """Produces a verdict. Raise on provider failure; the service turns it into an errored verdict."""

    name: ClassVar[str] = ""

    @abc.abstractmethod
    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Judge one claim (its verdict's `identity` says who judged, when the provider knows)."""

    def describe(self, request: JudgeRequest) -> JudgeIdentity | None:
        """Who would judge `request`, before any answer (an errored verdict still names its judge)."""
        return None

    async def aclose(self) -> None:
        """Release connections."""
