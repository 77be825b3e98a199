"""Stable test ids (valid Dagster partition keys) and content hashes."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from agent_health.model.limits import NAME_MAX

_UNSAFE = re.compile(r"[^a-z0-9]+")
_UNSAFE_ASCII = re.compile(r"[\x00-\x2f\x3a-\x60\x7b-\x7f]+")  # ASCII but a-z and 0-9 (after lower())
_LATIN_LETTER = re.compile(r"[a-z]")
_CODE_MAX = 60  # characters of a part's Punycode: every part stays within 64
_SUITE_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]+")
CODE_SUFFIX = ".eval.py"
DATA_SUFFIXES = (".json", ".yaml", ".yml", ".jsonl")


def slug(text: str) -> str:
    """'Checkout > Happy path!' -> 'checkout/happy-path'; each `describe` level is one part
    (`slug_part`)."""
    return "/".join(slug_part(p) for p in text.split(" > "))


def slug_part(text: str) -> str:
    """One part of a slug, in [a-z0-9-] (or '_').

    A part written in the Latin script keeps the slug it always had: lowercased, every run of
    other characters one '-' ('Happy path!' -> 'happy-path', 'café au lait' -> 'caf-au-lait',
    'deploy 🚀' -> 'deploy', '!!!' -> '_'). A part without a Latin letter that slug would keep, or
    with a letter of another script ('Проверка 1', '支付', '🚀', 'éé'), is kept apart from every
    other: it becomes 'xn--' and the Punycode (RFC 3492) of its NFC form, lowercased, with its
    punctuation and spaces one '-' ('Тест' -> 'xn--e1aybc'), as internationalized domain names are
    written; a code longer than `_CODE_MAX` keeps its start and a hash of the whole."""
    lower = text.lower()
    latin = _UNSAFE.sub("-", lower).strip("-")
    if text.isascii() or (_LATIN_LETTER.search(latin) and not _other_script(text)):
        return latin or "_"
    nfc = unicodedata.normalize("NFC", lower)
    kept = "".join(c if c.isascii() or unicodedata.category(c)[0] in "LMNS" else " " for c in nfc)
    kept = _UNSAFE_ASCII.sub("-", kept).strip("-")
    if not kept:  # punctuation only, as '!!!'
        return "_"
    code = kept.encode("punycode").decode("ascii")
    if len(code) > _CODE_MAX:
        code = f"{code[: _CODE_MAX - 13]}-{hashlib.sha256(kept.encode()).hexdigest()[:12]}"
    return "xn--" + code


def _other_script(text: str) -> bool:
    """Whether `text` holds a letter of a script other than Latin."""
    return any(c.isalpha() and not c.isascii() and not unicodedata.name(c, "").startswith("LATIN ") for c in text)


def suite_name(relative_path: str) -> str:
    """'rca/payments.eval.py' -> 'rca/payments'; 'cases.json' -> 'cases'."""
    path = relative_path.replace("\\", "/")
    for suffix in (CODE_SUFFIX, *DATA_SUFFIXES):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return _SUITE_UNSAFE.sub("-", str(PurePosixPath(path))).strip("-") or "suite"


def test_id(suite: str, name: str) -> str:
    return f"{suite}::{slug(name)}"


# what json.dumps(payload, sort_keys=True, default=str, separators=(",", ":")) builds per call,
# made once: a content hash is computed for every loaded test
_HASHED = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"))


def content_hash(payload: Mapping[str, Any], known: Mapping[str, str] | None = None) -> str:
    """The SHA-256 of `payload`'s canonical JSON (`canonical_json`). Stored with every result:
    results whose hash differs from their test's are stale (docs/staleness.md)."""
    return hashlib.sha256(canonical_json(payload, known).encode()).hexdigest()


def canonical_json(payload: Mapping[str, Any], known: Mapping[str, str] | None = None) -> str:
    """`json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))`, byte for byte,
    with the JSON of some values given by their key in `known` (already made, for a value many
    tests share). The top level is joined here: the encoder's own walk made a new string for
    every key, colon, comma and value and was about 50,000 instructions for a data case's dozen
    fields, a twentieth of a fixed-answer test, where a value's text made by itself is the same.
    Without `known`, the encoder's one walk (a value's own text costs a walk of its own)."""
    if not known:
        return _HASHED.encode(payload)
    keys = tuple(payload)
    order = _ORDERS.get(keys)
    if order is None:  # a file's cases mostly have the same keys: sorted and written once
        if len(_ORDERS) >= _ORDERS_KEPT:
            _ORDERS.clear()
        order = _ORDERS[keys] = tuple((key, _HASHED.encode(key) + ":") for key in sorted(keys))
    parts = []
    for key, prefix in order:
        text = known.get(key)
        if text is None:
            value = payload[key]
            # each call of the encoder is a Python call: the values that need none are written here
            if value is None:
                text = "null"
            elif value is True or value is False:
                text = "true" if value else "false"
            elif type(value) is int:
                text = int.__repr__(value)
            else:
                text = _HASHED.encode(value)
        parts.append(prefix + text)
    return "{" + ",".join(parts) + "}"


# each payload's keys as given -> those keys sorted, each with its JSON and colon (the keys are a
# test's few field names, in one or a few orders)
_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
_ORDERS_KEPT = 256


def canonical_value_json(value: Any) -> str:
    """A value's text inside `canonical_json` (for `known`)."""
    return _HASHED.encode(value)


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a test: it becomes the test id, a store key and a file name."""
    if len(name) > NAME_MAX:
        return f"the test name has {len(name):,} characters, above the limit of {NAME_MAX} (docs/limits.md)"
    return None


def shown_name(name: str, limit: int = 60) -> str:
    """A test name for a message: quoted, and cut when long."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + "..."
