"""Stable test ids (valid Dagster partition keys) and content hashes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath
from typing import Any

from agent_health.model.limits import NAME_MAX

_UNSAFE = re.compile(r"[^a-z0-9]+")
_SUITE_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]+")
CODE_SUFFIX = ".eval.py"
DATA_SUFFIXES = (".json", ".yaml", ".yml", ".jsonl")


def slug(text: str) -> str:
    """'Checkout > Happy path!' -> 'checkout/happy-path'."""
    parts = [_UNSAFE.sub("-", p.lower()).strip("-") for p in text.split(" > ")]
    return "/".join(p or "_" for p in parts)


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
