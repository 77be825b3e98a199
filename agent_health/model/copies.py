"""A frozen model with some fields replaced, made the way pydantic's `model_copy(update=...)`
makes it, for the engine's hot path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


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
    object.__setattr__(copy, "__dict__", values)
    object.__setattr__(copy, "__pydantic_extra__", None)
    object.__setattr__(copy, "__pydantic_fields_set__", given)
    object.__setattr__(copy, "__pydantic_private__", None)
    return copy
