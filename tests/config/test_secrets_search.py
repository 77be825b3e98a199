"""Searching text for secrets: an ASCII text (nearly every result's JSON) is searched with `in` for
each form, not with the regular expression (whose alternation tried every form at every position:
about 100 us for a 4 KB result and one API key, more than the rest of a fixed-answer test). The
answers must be exactly the expression's, whatever the case, the encoding, the window or the text."""

from __future__ import annotations

import random

import pytest

import agent_health.config.secrets as secrets
from agent_health.config.secrets import REDACTED, SecretSet, encoded_forms

SECRETS = ("sk-proj-Abc123Def456Ghi789", "p@ss w0rd/with+odd=chars", "Zm9vYmFyLWJhc2U2NC1zZWNyZXQ")


def _mixed_case(rng: random.Random, text: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def _texts(rng: random.Random, forms: list[str], n: int, alphabet: str):
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            pick = rng.random()
            form = rng.choice(forms)
            if pick < 0.2:
                parts.append(form)
            elif pick < 0.35:
                parts.append(_mixed_case(rng, form))
            elif pick < 0.5:  # a form cut short, or with one character changed: not a secret
                at = rng.randrange(len(form))
                parts.append(form[:at] if rng.random() < 0.5 else form[:at] + "#" + form[at + 1 :])
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
        yield "".join(parts)


@pytest.mark.parametrize("window", [None, 48])
@pytest.mark.parametrize("alphabet", ['ab xyz=+/%"\\', "ab xyzé€ K ſ ı İ"], ids=["ascii", "unicode"])
def test_the_search_answers_as_the_expression_does(monkeypatch, window, alphabet):
    if window:
        monkeypatch.setattr(secrets, "_WINDOW", window)
    found = SecretSet(SECRETS)
    forms = sorted({f for s in SECRETS for f in set.union(*encoded_forms(s))})
    rng = random.Random(11)
    seen = 0
    for text in _texts(rng, forms, 1500, alphabet):
        expected = found.pattern.search(text) is not None
        seen += expected
        userinfo = "://" in text and secrets._USERINFO.search(text) is not None
        assert found.found_in(text) == (expected or userinfo), text
        assert found.scrub_text(text) == secrets.redact_userinfo(found.pattern.sub(REDACTED, text)), text
    assert 300 < seen < 1400  # both answers were met many times


def test_a_secret_that_is_not_ascii_is_found_as_the_expression_finds_it():
    # ignoring case, the long s matches 's' and the Kelvin sign 'k': an ASCII text holds them
    found = SecretSet(["ſecret-Kelvin-value-1234"])
    for text in ("x secret-kelvin-value-1234 y", "SECRET-KELVIN-VALUE-1234", "ſecret-Kelvin-value-1234"):
        assert found.pattern.search(text) is not None
        assert found.found_in(text)
        assert found.scrub_text(text).count(REDACTED) == 1
    assert not found.found_in("secret-kelvin-value-123")


def test_an_ascii_text_is_not_scanned_by_the_expression():
    found = SecretSet(SECRETS)
    forms = found._compiled()

    class Refused:
        def search(self, *args):
            raise AssertionError("scanned by the expression")

        sub = finditer = search

    found._forms = forms._replace(pattern=Refused())
    assert not found.found_in('{"output":"nothing secret here","n":1}' * 100)
    assert found.scrub_text("plain text, nothing to replace") == "plain text, nothing to replace"
    assert found.found_in("key=" + SECRETS[0].upper())


def test_a_secret_added_after_a_search_is_searched_for():
    found = SecretSet([SECRETS[0]])
    assert not found.found_in("late-secret-value-987654")
    found.add("late-secret-value-987654")
    assert found.found_in("LATE-secret-value-987654")
    assert found.found_in(SECRETS[0])


def test_only_forms_holding_no_other_are_searched():
    forms = SecretSet(SECRETS)._compiled()
    for kept in (forms.folded, forms.exact):
        assert all(a == b or a not in b for a in kept for b in kept)
    every = {f for s in SECRETS for f in set.union(*encoded_forms(s))}
    assert len(forms.folded) + len(forms.exact) < len(every)  # some were held by others


def test_the_userinfo_prefilter_answers_as_searching_for_both_does():
    # slashes, colons and at signs in every arrangement, many slashes before the first "://" too:
    # the slashes looked at one by one and the search after them must agree with `in`
    rng = random.Random(5)
    pieces = ["/", ":", "@", "//", ":/", "://", "a", "x:y", "https://u:p@h/", " ", "é", "/" * 9]
    seen = {True: 0, False: 0}
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        expected = "@" in text and "://" in text
        seen[expected] += 1
        assert secrets._may_hold_userinfo(text) == expected, text
        # the prefilter never hides a URL with userinfo from the scrub
        if secrets._USERINFO.search(text):
            assert secrets.redact_userinfo(text) != text, text
    assert min(seen.values()) > 2_000


def test_a_url_with_userinfo_after_many_paths_is_still_found():
    text = '{"source_file": "evals/a/b/c/d/e/f/g/h/i.json", "agent": "k@v1", "out": "see https://bob:pw@db/x"}'
    assert SecretSet().found_in(text)
    assert "bob:pw" not in SecretSet().scrub_text(text)
    assert not SecretSet().found_in(text.replace("https://", "https:"))
