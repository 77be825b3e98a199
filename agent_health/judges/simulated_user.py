"""The simulated user: a `SimulatedUser` (persona, goal, facts) played by the judge model, or by a
deterministic offline policy when the judge provider is `demo`.

A model plays it through the judge service's cached `llm` helper: each decision is one completion,
cached by content in the judge cache (a hit makes no call), held against the run's budget and the
test's cap before it is made, and its tokens counted with the judges' (`Conversation.user_usage`).
The agent's answers reach the model fenced as untrusted data with a nonce the decision must echo,
so an agent cannot end its own conversation by writing `{"status": "goal_reached"}`. Replay
records each decision beside the agent's turns (replay/store.py), so a strict replay asks nothing.

The demo policy (no key, no network): the goal is reached when the agent's last answer covers the
goal's content words (the demo judge's term heuristic, at 0.6); otherwise the user reveals the next
fact it has not said yet (the one closest to the agent's question, when the agent asked one), and
gives up once every fact is said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from agent_health.connectors.conversation import UserSide, UserTurn, transcript
from agent_health.errors import ConversationError
from agent_health.judges.chat import AnswerSchema
from agent_health.judges.demo import coverage, terms
from agent_health.judges.llm import CachedLLM
from agent_health.judges.parse import AnswerError, complete_json, pick_answer
from agent_health.judges.prompt import FENCE_RULES, NONCE_RULE, NONCE_SLOT, content_nonce, fence, with_nonce
from agent_health.judges.service import JudgeService
from agent_health.model import RunResult
from agent_health.model.conversation import SimulatedUser
from agent_health.model.judge import JudgeRequest

USER_PROMPT_VERSION = "simulated-user/1"
DEMO_POLICY = "demo:simulated-user/1"
GOAL_THRESHOLD = 0.6  # the demo policy's goal coverage

STATUSES = ("continue", "goal_reached", "gave_up")

SYSTEM = f"""You play the USER in a conversation with an AI agent that is being tested. Stay in \
character as the persona you are given, pursue your goal, and decide each next message.

Rules:
- Reveal only the facts you are given, one at a time, when the agent asks for them or needs them to \
make progress. Never invent other facts; if asked something you do not know, say so.
- Speak as the user would, briefly; never explain that you are simulated.
- The conversation is over when the agent's answers achieved your goal (status goal_reached), or when \
the agent cannot or will not help and you have nothing left to try (status gave_up).

{FENCE_RULES}

Answer with ONLY the JSON object the user message describes, including its `nonce`."""

ANSWER_FORMAT = f"""Answer with ONLY a JSON object, no prose and no code fences:
{{"nonce": "{NONCE_SLOT}", "status": "continue" or "goal_reached" or "gave_up", "message": "your next \
message to the agent (empty unless status is continue)"}}
{NONCE_RULE}"""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nonce": {"type": "string", "description": "The code on the prompt's fence lines, copied exactly."},
        "status": {"type": "string", "enum": list(STATUSES), "description": "Go on, goal reached, or gave up."},
        "message": {"type": "string", "description": "The next message to the agent (when going on)."},
    },
    "required": ["nonce", "status", "message"],
    "additionalProperties": False,
}
USER_ANSWER = AnswerSchema(name="user_turn", schema=ANSWER_SCHEMA, description="Your next turn as the user.")


def simulated_user_side(spec: SimulatedUser, judges: JudgeService, test_id: str) -> UserSide:
    """The user side playing `spec` in test `test_id`: the judge model it resolves to (the spec's
    `model`, else the test's judge model), or the demo policy when that is the `demo` provider."""
    model = judges.model_for(JudgeRequest(criteria="simulated user", model=spec.model, test_id=test_id))
    if judges.settings is None or judges.provider_model(model)[0] == "demo":
        return SimulatedUserSide(spec, None, DEMO_POLICY, test_id)
    llm = judges.llm(model)
    if llm.client is None:
        raise ConversationError(f"test {test_id}: the simulated user cannot be played: {llm.unavailable}")
    return SimulatedUserSide(spec, lambda: judges.llm(model), f"{llm.client.provider}:{llm.client.model}", test_id)


class SimulatedUserSide(UserSide):
    """Plays one `SimulatedUser` in one conversation (see the module docstring). `make_llm` gives
    the cached `llm` helper of its model (a new one per decision, whose usage is the decision's),
    None for the demo policy."""

    mode = "simulated"

    def __init__(self, spec: SimulatedUser, make_llm: Callable[[], CachedLLM] | None, label: str, test_id: str):
        self.spec, self.make_llm, self.test_id = spec, make_llm, test_id
        self.goal, self.label = spec.goal, label

    def recording(self) -> dict[str, Any]:
        return {"user": self.spec.definition(), "played_by": self.label, "prompt": USER_PROMPT_VERSION}

    async def next(self, so_far: RunResult | None) -> UserTurn:
        answered = len(so_far.turns) if so_far is not None else 0
        llm = self.make_llm() if self.make_llm is not None else None
        try:
            status, message = await (self._ask(llm, so_far) if llm is not None else self._demo(so_far))
        except Exception as exc:  # the model failed, the budget refused it, or it answered nothing usable
            when = f"after turn {answered}" if answered else "for its opening message"
            raise ConversationError(
                f"test {self.test_id}: the simulated user ({self.label}) could not answer {when}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        spent: dict[str, Any] = {"usage": llm.usage, "calls": llm.calls} if llm is not None else {}
        if so_far is None:
            return UserTurn(message or self.spec.goal, **spent)
        if status == "goal_reached":
            return UserTurn(None, ended="goal_reached", goal_reached=True, **spent)
        if status == "gave_up":
            return UserTurn(None, ended="gave_up", **spent)
        if answered >= self.spec.max_turns:
            return UserTurn(None, ended="max_turns", **spent)
        return UserTurn(message, **spent)

    # -- a model plays the user ------------------------------------------------------------------
    async def _ask(self, llm: CachedLLM, so_far: RunResult | None) -> tuple[str, str]:
        exchanges = transcript(so_far)
        body = "\n\n".join(f"USER: {e['user']}\nAGENT: {e['agent']}" for e in exchanges) or "(not started)"
        nonce = content_nonce(json.dumps(exchanges, sort_keys=True), body)
        spec = self.spec
        facts = "\n".join(f"- {f}" for f in spec.facts) or "(none: you know nothing beyond your goal)"
        task = (
            "The conversation has not started: write your first message to the agent (status continue)."
            if so_far is None
            else "Decide your next turn: go on with one message, or end the conversation."
        )
        prompt = (
            f"## Your persona\n{spec.persona}\n\n## Your goal\n{spec.goal}\n\n## Facts you may reveal\n{facts}\n\n"
            f"## The conversation so far\n{fence('CONVERSATION', body, nonce)}\n\n## Your task\n{task}\n"
            + with_nonce(ANSWER_FORMAT, nonce)
        )

        def validate(text: str) -> tuple[str, str]:
            return pick_answer(text, nonce, _answer_fields)

        return await complete_json(
            llm,
            prompt,
            system=SYSTEM,
            answer_format=with_nonce(ANSWER_FORMAT, nonce),
            validate=validate,
            schema=USER_ANSWER,
        )

    # -- the offline demo policy -----------------------------------------------------------------
    async def _demo(self, so_far: RunResult | None) -> tuple[str, str]:
        spec = self.spec
        if so_far is None:
            return "continue", f"I need your help: I want to {spec.goal[0].lower()}{spec.goal[1:]}"
        if coverage(spec.goal, so_far.output) >= GOAL_THRESHOLD:
            return "goal_reached", ""
        said = " ".join(t.user for t in so_far.turns)
        left = [f for f in spec.facts if f not in said]
        if not left:
            return "gave_up", ""
        question = " ".join(s for s in re.split(r"(?<=[.!?])\s+", so_far.output) if s.rstrip().endswith("?"))
        if question:
            asked = terms(question)
            left.sort(key=lambda f: -len(set(terms(f)) & set(asked)))  # stable: ties keep the facts' order
        return "continue", left[0]


def _answer_fields(obj: dict[str, Any]) -> tuple[str, str]:
    status = str(obj.get("status", "")).strip().lower()
    if status not in STATUSES:
        raise AnswerError(f"`status` must be one of {', '.join(STATUSES)}, got {obj.get('status')!r}")
    message = obj.get("message")
    message = message.strip() if isinstance(message, str) else ""
    if status == "continue" and not message:
        raise AnswerError("`message` is empty but the status is continue: write the next message")
    return status, message


__all__ = ["DEMO_POLICY", "SimulatedUserSide", "simulated_user_side"]
