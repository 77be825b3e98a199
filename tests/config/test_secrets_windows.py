"""A long text is searched for secrets one window at a time (the interpreter lock is held for one
regular-expression call, so a 100 MB text in one call stopped every other thread for seconds):
window by window, scrubbing gives exactly what one pass over the whole text gives, also for a
form that straddles two windows."""

from __future__ import annotations

import random

import pytest

import agent_health.config.secrets as secrets
from agent_health.config.secrets import REDACTED, SecretSet, encoded_forms

SECRETS = ("Sup3rSecretValue!", "an0ther-long-secret")


@pytest.fixture
def small_windows(monkeypatch):
    monkeypatch.setattr(secrets, "_WINDOW", 64)


def _texts(n: int):
    forms = sorted({f for s in SECRETS for f in set.union(*encoded_forms(s))})
    rng = random.Random(7)
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 30)):
            pick = rng.random()
            if pick < 0.3:
                parts.append(rng.choice(forms))
            elif pick < 0.45:  # another case, or the start of a form only
                form = rng.choice(forms)
                parts.append(form.upper() if rng.random() < 0.5 else form[: rng.randint(1, len(form))])
            else:
                parts.append("".join(rng.choice("ab xyzS=+/%") for _ in range(rng.randint(0, 80))))
        yield "".join(parts)


def test_scrubbing_window_by_window_is_scrubbing_the_whole_text(small_windows):
    found = SecretSet(SECRETS)
    for text in _texts(2000):
        assert found.scrub_text(text) == found.pattern.sub(REDACTED, text), text
        assert found.found_in(text) == (found.pattern.search(text) is not None), text


def test_a_form_straddling_two_windows_is_replaced_whole(small_windows):
    found = SecretSet(SECRETS)
    for cut in range(1, len(SECRETS[0])):
        text = "x" * (64 - cut) + SECRETS[0] + "y" * 100
        assert found.scrub_text(text) == "x" * (64 - cut) + REDACTED + "y" * 100
    assert found.scrub_text("z" * 1000) == "z" * 1000


def test_a_model_scrubbed_piecewise_is_the_model_scrubbed_whole(small_windows):
    from agent_health.model import Artifact, RunResult, Step

    found = SecretSet(SECRETS)
    body = "log line\n" * 40 + SECRETS[1] + "\n" + "more\n" * 40
    run = RunResult(
        output=f"the key is {SECRETS[0]}",
        run_id="r1",
        trajectory=(Step(kind="tool_call", tool="read", args={"path": "/x", "note": SECRETS[0]}),),
        raw_events=({"text": body},),
        artifacts=(Artifact(name="log.txt", media_type="text/plain", size=len(body), content=body, encoding="utf-8"),),
    )
    assert found.scrub_model(run, piecewise=True) == found.scrub_model(run)
    assert not any(s in found.scrub_model(run, piecewise=True).model_dump_json() for s in SECRETS)
