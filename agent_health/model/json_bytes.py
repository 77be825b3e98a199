"""A model's JSON, byte for byte what pydantic's serializer writes (`model_dump_json()`), made
by orjson where that is certain to give the same bytes, and by pydantic everywhere else.

Why: the engine encodes every result (its secrets check searches the JSON, the store writes it)
and every agent run (the connector's secrets check). pydantic-core's writer took 10-16 us for a
fixed-answer test's 3.4 kB result and 4-6 us for its run, 6-9% of the test's CPU; orjson, handed
each model's field values (its `__dict__`), writes the same bytes in 7 and 3 us, about half of it
the checks of int and float fields below.

When the bytes are the same: orjson writes str, int, float, bool, None, lists, tuples and
str-keyed dicts as pydantic does (the same float text, NaN and infinities as null, the same
escapes). A model is handed over only when its class is plain (`_plain_class`): it derives from
BaseModel directly (pydantic writes a subclass in a field typed as its parent with the parent's
fields only), has no computed fields, serializers, aliases, excluded fields, extra fields or
private attributes, and each field's type is one whose value pydantic writes as the value is,
but for `int` and `float` fields (and lists and dicts of them), whose values' exact types are
checked: pydantic writes an int in a float field as `1.0` and a bool in an int field as `1`.
Anything else (a set, a datetime, bytes, a dict with int keys, an int past 64 bits, a value of
another type) makes orjson fail, and the whole model is written by pydantic, as before.

A model whose class has a `_json` slot (a run, a result) may remember its own JSON text there
(`remember_json`, when a check for secrets made it): that text is written as it is, so a result
holding a run its connector checked does not encode the run again."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

import orjson
from pydantic import BaseModel

__all__ = ["model_json"]

# datetimes and dataclasses go to `default` (orjson writes them its own way), which refuses them
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS

_NONE = type(None)
_FLOAT_OK = frozenset({float, _NONE})
_INT_OK = frozenset({int, _NONE})


class _NotPlain(TypeError):
    """Raised inside orjson's `default`: the model goes to pydantic."""


# per model class: a function from a model to its field values (for orjson to write), which
# raises _NotPlain for a class or a value pydantic must write; made once per class (`_compiled`)
_WRITERS: dict[type, Any] = {}


def _kind(annotation: Any) -> str | None:
    """'float' or 'int' for a field pydantic writes by its type (checked), 'as-is' for one it
    writes as the value is, None for anything else."""
    if annotation is float:
        return "float"
    if annotation is int:
        return "int"
    if annotation in (str, bool, Any, _NONE) or annotation is None:
        return "as-is"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "as-is"  # a nested model is planned on its own when orjson meets it
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "as-is" if all(isinstance(a, (str, bool)) or a is None for a in args) else None
    if origin is Annotated:
        return _kind(args[0]) if all(_harmless(m) for m in annotation.__metadata__) else None
    if origin in (Union, types.UnionType):
        kinds = {_kind(a) for a in args if a is not _NONE}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None
    if origin in (tuple, list):
        kinds = {_kind(a) for a in args if a is not Ellipsis}
        return _container(kinds, "items")
    if origin is dict and args and args[0] is str:
        return _container({_kind(args[1])}, "values")
    return None


def _container(kinds: set[str | None], where: str) -> str | None:
    """A list, tuple or dict's kind from its items': as-is, or each item checked ('int items')."""
    if kinds <= {"as-is"}:
        return "as-is"
    if len(kinds) == 1 and kinds & {"int", "float"}:
        return f"{kinds.pop()} {where}"
    return None


def _harmless(meta: Any) -> bool:
    """Annotated metadata that only validates (pydantic's Before/After validators, field
    constraints), never changes how a value is written."""
    name = type(meta).__name__
    return name in {"AfterValidator", "BeforeValidator"} or type(meta).__module__.startswith("annotated_types")


def _compiled(cls: type) -> Any:
    """The function giving a plain model class's field values, or one that refuses the class."""
    if not _plain_class(cls):
        return _refuse
    names = tuple(cls.model_fields)  # type: ignore[attr-defined]
    lines = ["def values(model):"]
    scope: dict[str, Any] = {"_FLOAT_OK": _FLOAT_OK, "_INT_OK": _INT_OK, "_NotPlain": _NotPlain}
    if "_json" in cls.__dict__.get("__slots__", ()):  # a model that may remember its own JSON text
        scope["_remembered"] = cls.__dict__["_json"].__get__
        scope["_Fragment"] = orjson.Fragment
        lines += [
            "    try:",
            "        return _Fragment(_remembered(model))",
            "    except AttributeError:  # none remembered",
            "        pass",
        ]
    lines += [
        "    d = model.__dict__",
        f"    if len(d) != {len(names)}:  # something set beside the fields (object.__setattr__)",
        f"        d = {{name: d[name] for name in {names!r}}}",
    ]
    for name, field in cls.model_fields.items():  # type: ignore[attr-defined]
        kind = _kind(field.annotation)
        if kind is None:
            return _refuse
        what, _, where = kind.partition(" ")
        if what == "as-is":
            continue
        lines.append(f"    v = d[{name!r}]")
        if not where:  # `is` on the exact class: a few bytecodes a field (a set lookup took 70 ns)
            lines.append(f"    if v.__class__ is not {what} and v is not None:")
        else:  # a list's or a dict's items, when there are any
            items = "v.values()" if where == "values" else "v"
            lines.append(f"    if v and not _{what.upper()}_OK.issuperset(map(type, {items})):")
        lines.append("        raise _NotPlain(v)")
    lines.append("    return d")
    exec("\n".join(lines), scope)  # the code is made of the class's own field names, each repr'd
    return scope["values"]


def _refuse(model: Any) -> Any:
    raise _NotPlain(type(model))


def _plain_class(cls: type) -> bool:
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls.__bases__ != (BaseModel,):
        return False
    decorators = cls.__pydantic_decorators__
    config = cls.model_config
    if (
        cls.model_computed_fields
        or decorators.field_serializers
        or decorators.model_serializers
        or cls.__private_attributes__
        or config.get("extra") == "allow"
        or config.get("serialize_by_alias")
        or config.get("ser_json_inf_nan", "null") != "null"
        or config.get("json_encoders")
    ):
        return False
    return not any(
        field.exclude
        or getattr(field, "exclude_if", None)
        or field.serialization_alias
        or (field.alias and field.alias != name)
        for name, field in cls.model_fields.items()
    )


def _values(model: Any) -> Any:
    """orjson's `default`: a plain model's field values, in field order."""
    writer = _WRITERS.get(model.__class__)
    if writer is None:
        writer = _WRITERS[model.__class__] = _compiled(model.__class__)
    return writer(model)


def model_json(model: BaseModel) -> bytes:
    """`model.model_dump_json().encode()`, the same bytes, in about half the time for the engine's
    results and runs. Raises what pydantic raises for a model it cannot write."""
    try:
        return orjson.dumps(model, default=_values, option=_OPTIONS)
    except TypeError:  # _NotPlain, or a value orjson does not write as pydantic would
        pass
    return model.__pydantic_serializer__.to_json(model)  # (outside the except: its errors stand alone)
