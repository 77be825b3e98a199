"""agent-health: an evaluation harness for AI agents.

Write tests with `test`, drive the agent with the `agent` fixture, assert with `expect` and
`judge`; run them with `agent-health run` or as Dagster assets.

Every public name is imported on first use (PEP 562): `from agent_health import test, expect` in
an eval file loads the authoring API, not the stores, judges, reports and data frames behind the
rest of this list. The list is written once, in the stub beside this file (`__init__.pyi`), which
type checkers read for what each name is and this module reads for where it comes from.
"""

from __future__ import annotations

import importlib
from typing import Any

from agent_health.lazy import stub_names

__version__ = "0.1.0"

# public name -> the module that defines it; and the names this module defines itself
_LAZY, _OWN = stub_names(__file__, __name__)
__all__ = sorted([*_LAZY, *_OWN])


def __getattr__(name: str) -> Any:
    if name == "agent":  # the current test's agent: one proxy, made on first use
        value: Any = __getattr__("AgentProxy")()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'agent_health' has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
