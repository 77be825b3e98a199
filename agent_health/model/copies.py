"""Models made for the engine's hot path without pydantic's copy or validation: a frozen model
with some fields replaced, as `model_copy(update=...)` makes it, and a model built from values
that are already valid, as the constructor makes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def _slot_setter(name: str) -> Callable[[BaseModel, Any], None]:
    """How to set one of BaseModel's own attributes: through its slot's descriptor (pydantic 2
    keeps them in `__slots__`), as `object.__setattr__(model, name, value)` does after looking the
    name up, which was about a quarter of building a model; by name if a release stops doing so."""
    found = BaseModel.__dict__.get(name)
    if found is not None and hasattr(found, "__set__"):
        return found.__set__  # type: ignore[no-any-return]
    return lambda model, value: object.__setattr__(model, name, value)


_SET_DICT = _slot_setter("__dict__")
_SET_EXTRA = _slot_setter("__pydantic_extra__")
_SET_FIELDS_SET = _slot_setter("__pydantic_fields_set__")
_SET_PRIVATE = _slot_setter("__pydantic_private__")


def replaced(model: M, update: Mapping[str, Any]) -> M:
    """`model.model_copy(update=update)`: a new object with the same field values but `update`'s,
    not validated, whose set of given fields gains `update`'s names. For a model without extra
    fields or private attributes (the run and result models) it is built directly: pydantic's
    copy goes through `copy.copy` three times, about 150 bytecodes, and the engine copies a run
    and a result for every test."""
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None:
        return model.model_copy(update=update)
    values = model.__dict__.copy()
    values.update(update)
    given = set(model.__pydantic_fields_set__)
    given.update(update)
    copy = object.__new__(type(model))
    _SET_DICT(copy, values)
    _SET_EXTRA(copy, None)
    _SET_FIELDS_SET(copy, given)
    _SET_PRIVATE(copy, None)
    return copy


_MISSING = object()
# per model class: its fields in order with their defaults (`_MISSING` for a required field, None
# for one with a factory), the fields with a default factory, and the required fields
_TEMPLATES: dict[type[BaseModel], tuple[dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]] = {}


def _template(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]:
    if cls.__private_attributes__ or cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__}: built() makes models without private attributes or extra fields")
    values: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    required: list[str] = []
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            values[name] = None
            factories.append((name, field.default_factory))
        elif field.is_required():
            values[name] = _MISSING
            required.append(name)
        else:
            hash(field.default)  # an immutable default: one object for every model built
            values[name] = field.default
    found = _TEMPLATES[cls] = (values, tuple(factories), frozenset(required))
    return found


def built(cls: type[M], values: Mapping[str, Any]) -> M:
    """`cls(**values)` for values that are already what validating them would make (the engine's
    own results, signals and runs: exact types, tuples where the field is a tuple, floats where
    it is a float, texts already cut to their limits): the same fields, defaults and set of given
    fields, without a validation, which rebuilt every tuple and dict again (a TestResult's took
    6 us, a fifth of a fixed-answer test's pydantic work). Not for anything a user or an agent
    gave: that is validated. A missing required field or an unknown one is a TypeError."""
    template, factories, required = _TEMPLATES.get(cls) or _template(cls)
    fields = template.copy()
    fields.update(values)
    # (each check only where the class has something to check: a tenth of the call each)
    if len(fields) != len(template) or (required and not required <= values.keys()):
        unknown = sorted(set(values) - set(template))
        missing = sorted(required - values.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    if factories:
        for name, factory in factories:
            if name not in values:
                fields[name] = factory()
    model = object.__new__(cls)
    _SET_DICT(model, fields)
    _SET_EXTRA(model, None)
    _SET_FIELDS_SET(model, set(values))
    _SET_PRIVATE(model, None)
    return model
