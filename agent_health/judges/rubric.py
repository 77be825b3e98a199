"""Rubric evaluators in agent-health's evaluator JSON format: weighted multi-metric scoring with a
pass threshold.

```json
{"name": "rca-quality", "systemPrompt": "You grade root-cause analyses...",
 "scoringConfig": {"metrics": [{"name": "accuracy", "weight": 0.6, "scale": "1-5"},
                               {"name": "actionability", "weight": 0.4, "scale": 5}]},
 "passThreshold": 0.7}
```

`scale` is `"lo-hi"`, `[lo, hi]`, `{"min": lo, "max": hi}`, or a number `hi` (meaning 0-hi); the
default is 0-1. Weights are relative (normalized to sum 1). `passThreshold` is a fraction of the
maximum weighted score (values above 1 are read as percent). The model scores each metric on its
scale; the verdict's score is the weighted mean of the normalized metric scores, it passes at the
threshold, and `details` carries the per-metric scores and improvement suggestions.

A `Rubric` is a custom evaluator: put it in `evaluators={"rca-quality": load_rubric("rca.json")}`
and call `judge(result, criteria, evaluator="rca-quality")`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_health.errors import ConfigError
from agent_health.judges.canonical import canonical_run, gather_traces
from agent_health.judges.chat import AnswerSchema
from agent_health.judges.llm import CachedLLM
from agent_health.judges.parse import AnswerError, complete_json, number, pick_answer
from agent_health.judges.prompt import FENCE_RULES, NONCE_RULE, NONCE_SLOT, PromptLimits, build_prompt
from agent_health.model import Verdict
from agent_health.model.judge import JudgeRequest

_RANGE = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(?:-|–|to|\.\.)\s*(-?\d+(?:\.\d+)?)\s*")


def _scale(value: Any) -> tuple[float, float]:
    if value is None:
        return (0.0, 1.0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = 0.0, float(value)
    elif isinstance(value, str) and (m := _RANGE.fullmatch(value)):
        lo, hi = float(m.group(1)), float(m.group(2))
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        lo, hi = float(value[0]), float(value[1])
    elif isinstance(value, dict) and "max" in value:
        lo, hi = float(value.get("min", 0)), float(value["max"])
    else:
        raise ValueError(f"scale {value!r} not understood; use 'lo-hi', [lo, hi], {{'min','max'}} or a number")
    if hi <= lo:
        raise ValueError(f"scale {value!r}: the maximum must be above the minimum")
    return (lo, hi)


class RubricMetric(BaseModel):
    """One scored dimension."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Metric name the model scores.")
    weight: float = Field(1.0, ge=0, description="Relative weight.")
    scale: tuple[float, float] = Field((0.0, 1.0), description="Score range (lo, hi).")
    description: str = Field("", description="What the metric measures, shown to the model.")

    @field_validator("scale", mode="before")
    @classmethod
    def _parse_scale(cls, value: Any) -> tuple[float, float]:
        return _scale(value)


class Rubric(BaseModel):
    """A weighted multi-metric evaluator (agent-health evaluator JSON)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field("rubric", description="Evaluator name recorded on verdicts.")
    system_prompt: str = Field("", description="The evaluator's instructions (systemPrompt).")
    metrics: tuple[RubricMetric, ...] = Field(description="scoringConfig.metrics.")
    pass_threshold: float = Field(0.7, description="Pass at this fraction of the maximum weighted score.")
    limits: PromptLimits = Field(default_factory=PromptLimits)

    @field_validator("pass_threshold")
    @classmethod
    def _threshold(cls, value: float) -> float:
        value = value / 100 if value > 1 else value
        if not 0 <= value <= 1:
            raise ValueError(f"passThreshold {value} must be within 0-1 (or 0-100 percent)")
        return value

    @classmethod
    def from_json(cls, data: dict[str, Any], *, source: str = "rubric") -> Rubric:
        """Build from agent-health's evaluator JSON (camelCase) or snake_case keys."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: an evaluator must be a JSON object")
        scoring = data.get("scoringConfig", data.get("scoring_config")) or {}
        metrics = scoring.get("metrics") if isinstance(scoring, dict) else None
        if metrics is None:
            metrics = data.get("metrics")
        if not metrics:
            raise ConfigError(f"{source}: scoringConfig.metrics is missing or empty")
        try:
            rubric = cls(
                name=str(data.get("name") or data.get("id") or Path(source).stem),
                system_prompt=str(data.get("systemPrompt", data.get("system_prompt")) or ""),
                metrics=tuple(metrics),
                pass_threshold=data.get(
                    "passThreshold",
                    data.get("pass_threshold", scoring.get("passThreshold", 0.7) if isinstance(scoring, dict) else 0.7),
                ),
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{source}: invalid evaluator: {problems}") from exc
        if sum(m.weight for m in rubric.metrics) <= 0:
            raise ConfigError(f"{source}: metric weights sum to 0")
        if len({m.name for m in rubric.metrics}) != len(rubric.metrics):
            raise ConfigError(f"{source}: metric names must be unique")
        return rubric

    # -- scoring ------------------------------------------------------------------
    def answer_format(self) -> str:
        lines = "\n".join(
            f'- "{m.name}": a number from {m.scale[0]:g} to {m.scale[1]:g}'
            + (f" ({m.description})" if m.description else "")
            for m in self.metrics
        )
        return (
            "Answer with ONLY a JSON object, no prose and no code fences:\n"
            f'{{"nonce": "{NONCE_SLOT}", "metrics": {{<metric name>: <score>, ...}}, '
            '"reasoning": "one short paragraph", "suggestions": ["concrete improvement", ...]}\n'
            f"{NONCE_RULE}\nMetrics and scales:\n" + lines
        )

    def answer_schema(self) -> AnswerSchema:
        """The answer's JSON schema, for providers' structured outputs."""
        names = [m.name for m in self.metrics]
        return AnswerSchema(
            name="rubric_scores",
            description=f"Your scores for the {self.name} rubric.",
            schema={
                "type": "object",
                "properties": {
                    "nonce": {"type": "string"},
                    "metrics": {
                        "type": "object",
                        "properties": {n: {"type": "number"} for n in names},
                        "required": names,
                        "additionalProperties": False,
                    },
                    "reasoning": {"type": "string"},
                    "suggestions": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["nonce", "metrics", "reasoning", "suggestions"],
                "additionalProperties": False,
            },
        )

    def parse(self, text: str, nonce: str) -> dict[str, Any]:
        """The model's own answer in `text` (the last object carrying `nonce`): every metric present
        and within its scale."""
        return pick_answer(text, nonce, self.fields)

    def fields(self, obj: dict[str, Any]) -> dict[str, Any]:
        raw = obj.get("metrics", obj.get("scores"))
        if isinstance(raw, list):
            raw = {str(m.get("name")): m.get("score") for m in raw if isinstance(m, dict)}
        if not isinstance(raw, dict):
            raise AnswerError("the answer has no `metrics` object")
        missing = [m.name for m in self.metrics if m.name not in raw]
        if missing:
            raise AnswerError(f"metrics missing: {missing}")
        scores = {m.name: number(raw[m.name], f"metrics.{m.name}", *m.scale) for m in self.metrics}
        suggestions = obj.get("suggestions") or []
        if isinstance(suggestions, str):
            suggestions = [suggestions]
        return {
            "scores": scores,
            "reasoning": str(obj.get("reasoning", "")),
            "suggestions": [str(s) for s in suggestions],
        }

    def score(self, scores: dict[str, float]) -> tuple[float, dict[str, dict[str, float]]]:
        """(weighted 0-1 score, per-metric breakdown)."""
        total = sum(m.weight for m in self.metrics)
        per: dict[str, dict[str, float]] = {}
        weighted = 0.0
        for m in self.metrics:
            lo, hi = m.scale
            normalized = (scores[m.name] - lo) / (hi - lo)
            per[m.name] = {"score": scores[m.name], "normalized": round(normalized, 4), "weight": m.weight}
            weighted += normalized * m.weight / total
        return round(weighted, 4), per

    # -- as a custom evaluator ---------------------------------------------------------
    async def __call__(self, request: JudgeRequest, llm: CachedLLM) -> Verdict:
        content = canonical_run(request)
        traces = await gather_traces(request)
        system = (
            self.system_prompt.strip() + "\n\n"
            if self.system_prompt.strip()
            else "You are a strict, impartial evaluator of an AI agent's run.\n\n"
        ) + FENCE_RULES
        prompt = build_prompt(
            request.criteria,
            content,
            traces,
            request.context,
            self.limits,
            system=system,
            answer_format=self.answer_format(),
            claim_heading="What to evaluate",
        )
        answer = await complete_json(
            llm,
            prompt.user,
            system=prompt.system,
            answer_format=prompt.answer_format,
            validate=lambda text: self.parse(text, prompt.nonce),
            schema=self.answer_schema(),
        )
        weighted, per = self.score(answer["scores"])
        passed = weighted >= self.pass_threshold
        return Verdict(
            passed=passed,
            score=weighted,
            criteria=request.criteria,
            role=request.role,
            reasoning=f"{answer['reasoning']} (weighted {weighted:.2f}, pass at {self.pass_threshold:.2f})",
            evaluator=self.name,
            model=llm.model,
            details={
                "rubric": self.name,
                "metrics": per,
                "suggestions": answer["suggestions"],
                "pass_threshold": self.pass_threshold,
            },
        )


def load_rubric(source: str | Path | dict[str, Any]) -> Rubric:
    """A Rubric from a JSON file path or an already-parsed dict (ConfigError naming the file on bad input)."""
    if isinstance(source, dict):
        return Rubric.from_json(source)
    path = Path(source)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"evaluator file {path}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"evaluator file {path}: not valid JSON: {exc}") from exc
    return Rubric.from_json(data, source=str(path))
