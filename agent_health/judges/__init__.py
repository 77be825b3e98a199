"""Judges: turn `judge(result, criteria)` into a Verdict.

- `service.JudgeService`: routing (custom evaluator, or provider/model per run, test or call), skip
  mode, the judge concurrency limit, and "never raises" (failures become errored verdicts).
- Providers: `demo` (offline heuristic), `openai` (any OpenAI-compatible endpoint, httpx) and
  `bedrock` (Converse through boto3, imported lazily), behind `chat.ChatClient` with rate-limit backoff;
  `registry` lists them by kind, and installed packages add kinds (entry points `agent_health.judges`).
- `llm_judge.LLMJudge` (contextual, one call) and `agentic` (bounded trace-tool loop) build the fenced
  prompt with its nonce (`prompt`), ask for a structured verdict, take only the judge's own answer
  (the last object carrying the nonce), repaired locally before any second call (`parse`), and
  cache verdicts by content (`cache`, `canonical`).
- `rubric.Rubric` (agent-health evaluator JSON) and `custom` evaluators get the cached `llm` helper (`llm`).
"""

from typing import TYPE_CHECKING

from agent_health.lazy import lazy_names

if TYPE_CHECKING:
    from agent_health.judges.rubric import Rubric, load_rubric

# a rubric loads the LLM helper, the cache and the answer parser: on first use, so that importing
# one judge module (the prompt fences, the demo judge) does not import them all
_LAZY = dict.fromkeys(["Rubric", "load_rubric"], "agent_health.judges.rubric")
__getattr__ = lazy_names(__name__, _LAZY)


__all__ = ["Rubric", "load_rubric"]
