"""A content hash is the SHA-256 of `json.dumps(payload, sort_keys=True, default=str,
separators=(",", ":"))`: stored with every result, it decides which are stale, so the loader's
faster way to the same text (`canonical_json`, the JSON of shared values made once) must give it
byte for byte, for any payload and whatever its cache of shared texts holds."""

from __future__ import annotations

import datetime
import enum
import hashlib
import json
import random
from typing import Any

import pytest

from agent_health import load_tests
from agent_health.loader import data
from agent_health.loader.ids import canonical_json, canonical_value_json


class Level(enum.IntEnum):
    HIGH = 3


KEYS = ["name", "Name", "_x", "é", "z9", "a b", "\u2713", "10", "2", "", "prompt", "labels"]
TEXTS = ["", "plain", 'quote " and \\ back', "tab\tnew\nline", "\u00dcn\u00efcode \u2713", "emoji \U0001f680"]
TEXTS += ["\x00\x1f"]


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 7, 2**70, -(2**64)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1.5, 1e300, -2.5e-8, float("inf"), float("-inf"), float("nan")])
    if kind in (4, 5):
        return rng.choice(TEXTS)
    if kind == 6:
        return datetime.date(2026, 12, 7)  # no JSON form: default=str
    if kind == 7:
        return Level.HIGH
    if kind in (8, 9):
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return tuple(items) if kind == 8 else items
    return {rng.choice(KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


@pytest.mark.parametrize("seed", range(300))
def test_the_canonical_json_is_the_encoders_byte_for_byte(seed):
    rng = random.Random(seed)
    payload = {key: _value(rng) for key in rng.sample(KEYS, rng.randrange(1, len(KEYS)))}
    known = {key: canonical_value_json(payload[key]) for key in payload if rng.random() < 0.5}
    expected = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    assert canonical_json(payload, known) == expected
    assert canonical_json(payload) == expected


def _context(i: int) -> str:
    """A case's context value: a long one now and then, whose JSON is not kept (made for each case)."""
    return f"v{i % 7}" * (3_000 if i % 50 == 1 else 1)


def test_data_case_hashes_do_not_depend_on_the_shared_texts(tmp_path, monkeypatch):
    # cases repeating and not repeating their labels, outcomes, context and steps, past the
    # number of shared texts kept at once, some too long to be kept
    rng = random.Random(7)
    cases = []
    for i in range(1_100):
        shared = i % 3 == 0
        cases.append(
            {
                "name": f"case {i}",
                "prompt": rng.choice(TEXTS[1:]),
                "labels": ["common"] if shared else [f"label {i}", "common"],
                "expected_outcomes": ["finds it"] if shared else [f"finds {i}"],
                "context": [] if shared else [{"description": "ctx", "value": _context(i)}],
                "expected_tools": ["lookup"] if i % 2 else [],
            }
        )
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")

    def hashes() -> dict[str, str]:
        loaded = load_tests([path])
        assert not loaded.errors
        return {t.case.id: t.case.content_hash for t in loaded.tests}

    def reference(payload: dict[str, Any], known: object = None) -> str:
        """The hash as the loader made it before: the whole payload through json.dumps, the
        context items and steps as their model_dump()."""
        plain = dict(payload)
        for key in ("context", "expected_trajectory"):
            plain[key] = [item.model_dump() for item in payload[key]]
        text = json.dumps(plain, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    found = hashes()
    assert len(set(found.values())) == len(cases)
    monkeypatch.setattr(data, "_TEXTS_KEPT", 2)  # the kept texts cleared again and again
    assert hashes() == found
    monkeypatch.setattr(data, "content_hash", reference)
    assert hashes() == found
