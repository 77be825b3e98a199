"""An answer's recognized keys are found whatever else the answer holds: each spelling of the
answer, tool calls, thinking and steps parses to what it says in a small answer and the same in
one padded with many keys no parser reads (which are looked up, not walked)."""

from __future__ import annotations

import pytest

from agent_health.connectors.parsing import OUTPUT_KEYS, STEP_KEYS, THINKING_KEYS, TOOL_KEYS, parse_body

CALL = [{"name": "lookup", "args": {"q": "db"}, "id": "c1"}]
STEPS = [{"kind": "message", "role": "assistant", "content": "from the steps"}]


def _answers() -> list[tuple[dict, str, tuple[str, ...]]]:
    """(answer, its text, the kinds of its steps)."""
    found = [({key: "the answer"}, "the answer", ("message",)) for key in OUTPUT_KEYS]
    found += [({"output": "done", key: CALL}, "done", ("tool_call", "message")) for key in TOOL_KEYS]
    found += [({"output": "done", key: "thought"}, "done", ("thinking", "message")) for key in THINKING_KEYS]
    found += [({"output": "from the steps", key: STEPS}, "from the steps", ("message",)) for key in STEP_KEYS]
    found += [({"answer": "", "result": "the later key"}, "the later key", ("message",)), ({}, "", ())]
    return found


@pytest.mark.parametrize("answer, text, kinds", _answers(), ids=lambda a: "+".join(a) if isinstance(a, dict) else "")
def test_each_key_is_found_in_a_small_and_a_large_answer(answer, text, kinds):
    small = parse_body(answer)
    assert (small[0], tuple(s.kind for s in small[1])) == (text, kinds)
    assert parse_body({f"unread_{i}": i for i in range(200)} | answer) == small
