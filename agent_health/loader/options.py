"""The options of `@test(...)`, validated like a data case's fields, and the field types both share.

Kept apart from the data-file formats (`agent_health.loader.formats`) so that eval files written in
Python do not build the data-case models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agent_health.model.validation import describe_errors


def one_or_many(value: Any) -> Any:
    """A lone string or object where a list is expected is a one-element list."""
    if isinstance(value, (str, bytes, Mapping)):
        return [value]
    return value


def no_bool(value: Any) -> Any:
    # pydantic's lax mode reads `true` as 1: for a timeout or a count that is a mistake, not a value
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


Strings = Annotated[tuple[str, ...], BeforeValidator(one_or_many)]
Timeout = Annotated[float, BeforeValidator(no_bool), Field(gt=0, allow_inf_nan=False)]
Epochs = Annotated[int, BeforeValidator(no_bool), Field(ge=1)]


class CaseModel(BaseModel):
    """The base of the option and data-case models: frozen, numbers read as text where text is
    expected, fields by name or alias."""

    model_config = ConfigDict(frozen=True, coerce_numbers_to_str=True, populate_by_name=True)


class TestOptions(CaseModel):
    """The options of `@test(...)`, checked like a data case's (`agent_health.sdk.test`)."""

    __test__ = False

    labels: Strings = ()
    expected_outcomes: Strings = ()
    timeout: Timeout | None = None
    epochs: Epochs | None = None
    skip_judge: bool | None = None


def check_options(**options: Any) -> TestOptions:
    """`@test` options validated; raises ValueError naming the option."""
    try:
        return TestOptions.model_validate(options)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc)) from None
