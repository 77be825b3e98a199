"""What a conversation's user side is: scripted turns, or a simulated user (a persona with a goal
and the facts it may reveal), as a test or a data case gives them to `agent.run()`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_health.model.limits import TURNS_MAX, Turns

DEFAULT_MAX_TURNS = 8


class SimulatedUser(BaseModel):
    """A user played by a model (the run's judge model, or `model=`) or, with the offline `demo`
    judge provider, by a deterministic policy: it opens the conversation (`opening`, else the test's
    prompt, else a message it writes), answers each of the agent's replies as `persona` would, in
    pursuit of `goal`, revealing only `facts` (one at a time, when asked or needed), and says when
    the conversation is over: its goal reached, given up, or `max_turns` answers reached.

    `agent.run(user=SimulatedUser(goal=..., facts=[...]))`; a data case writes the same fields under
    `user:`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str = Field(description="What the user wants from the conversation; decides when it is over.")
    persona: str = Field("a user of the agent", description="Who the user is and how they talk.")
    facts: tuple[str, ...] = Field(
        (), description="What the user knows and may reveal, one at a time, when asked or needed; nothing else."
    )
    opening: str | None = Field(None, description="The first message; else the test's prompt, else the user's own.")
    max_turns: Turns = Field(DEFAULT_MAX_TURNS, description=f"Agent answers at most (1 to {TURNS_MAX}).")
    model: str | None = Field(None, description="[provider:]model playing the user; default the run's judge model.")

    @field_validator("goal")
    @classmethod
    def _has_goal(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a simulated user needs a goal: a non-empty string")
        return value.strip()

    @field_validator("facts", mode="before")
    @classmethod
    def _facts(cls, value: Any) -> Any:
        if isinstance(value, str):  # one fact, never its characters
            return (value,)
        if isinstance(value, Mapping):  # {order: 1234} reads as the fact "order: 1234"
            return tuple(f"{k}: {v}" for k, v in value.items())
        return value

    def definition(self) -> dict[str, Any]:
        """What decides this user's messages (its recordings' and cache keys' part)."""
        return self.model_dump(mode="json")


def check_turns(turns: Any, where: str) -> tuple[Any, ...]:
    """Scripted turns as a tuple (a string, or a function of the conversation so far, each); a
    TypeError or ValueError naming `where` for anything else or past TURNS_MAX."""
    if isinstance(turns, (str, bytes)) or callable(turns):
        turns = [turns]
    try:
        items = tuple(turns)
    except TypeError:
        raise TypeError(
            f"{where}: turns must be a list of user messages (strings, or functions of the conversation so far), "
            f"got {type(turns).__name__}"
        ) from None
    for i, item in enumerate(items, start=1):
        if not (isinstance(item, str) or callable(item)):
            raise TypeError(
                f"{where}: turn {i + 1} is {type(item).__name__}; a turn is a string or a function of the "
                "conversation so far returning one (or None to end the conversation)"
            )
        if isinstance(item, str) and not item.strip():
            raise ValueError(f"{where}: turn {i + 1} is empty")
    if len(items) + 1 > TURNS_MAX:
        raise ValueError(f"{where}: {len(items) + 1} turns; a conversation has at most {TURNS_MAX} (TURNS_MAX)")
    return items
