"""Stable test ids (valid Dagster partition keys) and content hashes."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
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


def content_hash(payload: dict[str, Any]) -> str:
    return hashlib.sha256(_HASHED.encode(payload).encode()).hexdigest()


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a test: it becomes the test id, a store key and a file name."""
    if len(name) > NAME_MAX:
        return f"the test name has {len(name):,} characters, above the limit of {NAME_MAX} (docs/limits.md)"
    return None


def shown_name(name: str, limit: int = 60) -> str:
    """A test name for a message: quoted, and cut when long."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + "..."
