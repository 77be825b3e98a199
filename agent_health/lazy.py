"""Imports on first use, so that importing a package does not import every module behind its
public names: what a run never touches is never loaded.

- `lazy_names`: a package's public names (PEP 562 `__getattr__`).
- `deferred`: one module that only some calls need (a heavy third-party library, a command's or a
  backend's own module), named at the top of the module that uses it:

      if TYPE_CHECKING:
          import json_repair  # the type checker and tests/core/test_layers.py see the real import
      else:
          json_repair = deferred("json_repair")  # imported at the first attribute lookup

  This is the one place deferred imports go: an `import` inside a function is a lint error
  (ruff PLC0415), so an import that is not deferred on purpose sits at the top of its module."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import types
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


def stub_names(init_file: str, package: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The public names a package's stub (`__init__.pyi` beside `init_file`) declares: each
    re-export `from MODULE import NAME as NAME` as NAME -> MODULE (a relative MODULE is resolved
    against `package`), and the other names it annotates at module level (`agent: AgentProxy`),
    which the package defines itself. Other imports of the stub (`from typing import Any`) are
    not public. The stub is then the one list of the names: type checkers read it for what they
    are, and the package reads it for where they come from, its `__all__` and its `dir()`."""
    path = init_file.removesuffix(".py") + ".pyi"
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    lazy: dict[str, str] = {}
    own: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level:
                module = importlib.util.resolve_name(module, package)
            lazy.update((a.name, module) for a in node.names if a.asname == a.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.append(node.target.id)
    return lazy, tuple(own)


class _Deferred(types.ModuleType):
    """Stands in for a module until an attribute is looked up; nothing enters sys.modules before."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)

    def __repr__(self) -> str:
        return f"<deferred module {self.__name__!r}>"


def deferred(module: str) -> types.ModuleType:
    """`module`, imported at the first attribute lookup on the returned object (then looked up in
    sys.modules at each use). A missing module is the ModuleNotFoundError of that first use."""
    return _Deferred(module)
