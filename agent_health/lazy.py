"""Package names imported on first use (PEP 562), so that importing a package does not import
every module behind its public names: what a run never touches is never loaded."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package`: `name` is imported from `modules[name]` the
    first time it is looked up; any other name is an AttributeError naming the package."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
