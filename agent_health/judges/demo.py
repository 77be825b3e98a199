"""The offline `demo` judge: a deterministic heuristic, not an LLM.

It scores how well the run supports the criteria by term coverage: the criteria's content words
(lower-cased, light suffix stemming, stop words dropped) are looked up in the final output (weight
1.0; in a conversation, every answer the agent gave) and in the trajectory's tool names, arguments
and results (weight 0.5). The score is the
weighted share of terms found; the claim passes at `threshold` (default 0.6). Good enough to make
the demo honest and repeatable; use a real provider for real judging.
"""

from __future__ import annotations

import re

from agent_health.config.fingerprints import digest
from agent_health.judges.base import JudgeProvider
from agent_health.model import JudgeIdentity, Verdict
from agent_health.model.judge import JudgeRequest

_STOP = frozenset(
    (
        "a an the and or of to in on at for from by with without into is are was were be been being that "
        "this these those it its as if then than so such not no do does did has have had which who whom "
        "whose what when where why how all any each both more most other some only own same too very can "
        "will just should now identifies identify identified mentions mention explains explain states state "
        "says say answer agent response output correctly correct clear clearly root cause causes "
    ).split()
)
HEURISTIC_VERSION = "demo-heuristic/1"  # bump when the scoring rule changes
_WORD = re.compile(r"[a-z0-9][a-z0-9_.:-]*[a-z0-9]|[a-z0-9]")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> dict[str, str]:
    """Content words of `text`: stem -> the word as written."""
    seen: dict[str, str] = {}
    for w in _WORD.findall(text.lower()):
        for part in re.split(r"[-_.:]", w) if len(w) > 12 else (w,):
            if part and part not in _STOP and len(part) > 2:
                seen.setdefault(_stem(part), part)
    return seen


def _bag(text: str) -> set[str]:
    return {_stem(p) for w in _WORD.findall(text.lower()) for p in {w, *re.split(r"[-_.:]", w)} if p}


def coverage(claim: str, text: str) -> float:
    """The share of `claim`'s content words found in `text` (1.0 when the claim has none): the
    demo heuristic's score on an output alone."""
    wanted = terms(claim)
    if not wanted:
        return 1.0
    found = _bag(text)
    return sum(1 for t in wanted if t in found) / len(wanted)


class DemoJudge(JudgeProvider):
    """Deterministic term-coverage heuristic (see module docstring)."""

    name = "demo"

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold
        self.identity = JudgeIdentity(
            provider="demo",
            model="demo-heuristic",
            evaluator="demo",
            kind="demo",
            definition_hash=digest({"heuristic": HEURISTIC_VERSION, "threshold": threshold}),
        )

    def describe(self, request: JudgeRequest) -> JudgeIdentity:
        return self.identity

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        # a named judge's plain claim (Factuality's reference answer), without its instructions' words
        wanted = terms(str(request.options.get("demo_claim") or request.criteria))
        run = request.run
        said = request.output
        if run is not None and run.turns and said == run.output:  # a conversation: every answer the agent gave
            said = "\n".join(t.output for t in run.turns)
        output = _bag(said)
        traj = set()
        if request.run is not None and "trajectory" in request.context:
            traj = _bag(
                " ".join(
                    f"{s.tool or ''} {s.args or ''} {s.content}" for s in request.run.trajectory if s.kind != "message"
                )
            )
        if not wanted:
            return Verdict(
                passed=True,
                score=1.0,
                criteria=request.criteria,
                role=request.role,
                evaluator="demo",
                reasoning="criteria has no content words to check",
                identity=self.identity,
            )
        found_out = [t for t in wanted if t in output]
        found_traj = [t for t in wanted if t not in output and t in traj]
        missing = [t for t in wanted if t not in output and t not in traj]
        score = round((len(found_out) + 0.5 * len(found_traj)) / len(wanted), 3)
        passed = score >= self.threshold
        reasoning = (
            f"demo heuristic: {len(found_out)}/{len(wanted)} criteria terms in the output"
            + (f", {len(found_traj)} more only in the trajectory" if found_traj else "")
            + (f"; missing: {', '.join(wanted[t] for t in missing[:8])}" if missing else "")
            + f" (score {score:.2f}, pass at {self.threshold:.2f})"
        )
        return Verdict(
            passed=passed,
            score=score,
            reasoning=reasoning,
            criteria=request.criteria,
            role=request.role,
            evaluator="demo",
            model="demo-heuristic",
            details={"found": [wanted[t] for t in found_out + found_traj], "missing": [wanted[t] for t in missing]},
            identity=self.identity,
        )
