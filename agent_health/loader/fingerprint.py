"""Normalised fingerprints of the code a test runs, for its content hash.

A test's outcome can change when its body changes, or any fixture it uses (transitively), any
hook in its scope, or any module-level function, class or constant those reference (again
transitively, within the eval file). The fingerprint covers exactly that, from the compiled
code objects rather than the source text: bytecode, constants and names carry no whitespace,
comments or line numbers, so reformatting or commenting a file changes nothing, while any
change Python would execute differently changes the fingerprint.

Names that come from outside the eval file (imported modules, library functions and classes)
count by their qualified name only: their code is not the eval file's to version.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")
_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def _global_names(code: types.CodeType) -> Iterator[str]:
    """Names a code object (and the lambdas, comprehensions and inner functions in it) may look
    up as globals. co_names also holds attribute names; only those bound in the module count."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


class Fingerprinter:
    """Fingerprints the functions of one eval file; results are cached per object, so a helper
    that many tests share is fingerprinted once."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self._cache: dict[int, str] = {}
        self._active: set[int] = set()
        # code objects are immutable and shared by every function made from one definition (tests
        # defined in a loop): each is fingerprinted once, with its global names
        self._codes: dict[types.CodeType, tuple[str, tuple[str, ...]]] = {}

    def of(self, callables: Iterable[Callable[..., Any]]) -> str:
        """One fingerprint over several callables, in the given order."""
        return _digest(self.value(fn) for fn in callables)

    def forget(self, obj: Any) -> None:
        """Drop `obj`'s cached fingerprint (a test's body, used by that test alone: a suite of
        50,000 tests would otherwise hold 50,000 digests while it loads); asked again, it is
        computed again, the same."""
        self._cache.pop(id(obj), None)

    # -- values -----------------------------------------------------------------------------

    def value(self, obj: Any) -> str:
        """A stable text for any value a test's code may reference."""
        if isinstance(obj, _PLAIN):
            return f"{type(obj).__name__}:{obj!r}"
        if isinstance(obj, (list, tuple)):
            return f"{type(obj).__name__}[" + ",".join(self.value(v) for v in obj) + "]"
        if isinstance(obj, (set, frozenset)):
            return f"{type(obj).__name__}{{" + ",".join(sorted(self.value(v) for v in obj)) + "}"
        if isinstance(obj, dict):
            items = sorted((self.value(k), self.value(v)) for k, v in obj.items())
            return "dict{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
        if isinstance(obj, types.ModuleType):
            return f"module:{obj.__name__}"
        if isinstance(obj, (staticmethod, classmethod)):
            return f"{type(obj).__name__}:" + self.value(obj.__func__)
        if isinstance(obj, property):
            return "property:" + ",".join(self.value(f) for f in (obj.fget, obj.fset, obj.fdel))
        if isinstance(obj, types.FunctionType):
            return self._cached(obj, self._function) if self._local(obj) else f"func:{_qualname(obj)}"
        if isinstance(obj, type):
            return self._cached(obj, self._class) if self._local(obj) else f"type:{_qualname(obj)}"
        if callable(obj) and hasattr(obj, "__wrapped__"):  # functools.wraps / partial-like wrappers
            return "wrapped:" + self.value(inspect.unwrap(obj))
        if isinstance(obj, types.BuiltinFunctionType | types.MethodType):
            return f"callable:{_qualname(obj)}"
        # An instance: its type, and its state when it has plain state (dataclasses, pydantic).
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict) and self._local(type(obj)):
            return self._cached(obj, lambda o: "obj:" + self.value(type(o)) + self.value(dict(vars(o))))
        return f"obj:{_qualname(type(obj))}:" + _ADDRESS.sub("", repr(obj))[:2000]

    def _local(self, obj: Any) -> bool:
        """Defined in this eval file (so its code is part of the test's definition)."""
        if isinstance(obj, types.FunctionType):
            return obj.__code__.co_filename == self.filename
        for member in vars(obj).values() if isinstance(obj, type) else ():
            fn = getattr(member, "__func__", member)
            if isinstance(fn, types.FunctionType):
                return fn.__code__.co_filename == self.filename
        return isinstance(obj, type) and getattr(obj, "__module__", "").startswith("agent_health_evals.")

    def _cached(self, obj: Any, make: Callable[[Any], str]) -> str:
        key = id(obj)
        if key in self._cache:
            return self._cache[key]
        if key in self._active:  # recursion (a helper that calls itself): its name is enough
            return f"recursive:{getattr(obj, '__qualname__', type(obj).__name__)}"
        self._active.add(key)
        try:
            text = make(obj)
        finally:
            self._active.discard(key)
        digest = _digest([text])
        self._cache[key] = digest
        return digest

    # -- code -------------------------------------------------------------------------------

    def _compiled(self, code: types.CodeType) -> tuple[str, tuple[str, ...]]:
        """The code object's fingerprint and the global names it may look up, computed once."""
        known = self._codes.get(code)
        if known is None:
            known = self._codes[code] = (self._code(code), tuple(sorted(set(_global_names(code)))))
        return known

    def _code(self, code: types.CodeType) -> str:
        consts = [self._code(c) if isinstance(c, types.CodeType) else self.value(c) for c in code.co_consts]
        return _digest(
            [
                code.co_code.hex(),
                ",".join(consts),
                ",".join(code.co_names),
                ",".join(code.co_varnames),
                ",".join(code.co_freevars),
                str(code.co_flags),
                str(code.co_argcount),
                str(code.co_kwonlyargcount),
            ]
        )

    def _function(self, fn: types.FunctionType) -> str:
        fingerprint, global_names = self._compiled(fn.__code__)
        parts = [fingerprint, self.value(fn.__defaults__), self.value(fn.__kwdefaults__ or {})]
        for cell in fn.__closure__ or ():
            try:
                parts.append(self.value(cell.cell_contents))
            except ValueError:  # an empty cell
                parts.append("cell:empty")
        module = fn.__globals__
        for name in global_names:
            if name in module:
                parts.append(f"{name}={self.value(module[name])}")
        return "\n".join(parts)

    def _class(self, cls: type) -> str:
        parts = [cls.__qualname__, ",".join(_qualname(b) for b in cls.__bases__)]
        for name, member in sorted(vars(cls).items()):
            if (name.startswith("__") and not isinstance(member, types.FunctionType)) or name == "_abc_impl":
                continue  # interpreter and framework bookkeeping (pydantic, abc), not the class's definition
            parts.append(f"{name}={self.value(member)}")
        return "\n".join(parts)


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    return f"{module}.{name}"
