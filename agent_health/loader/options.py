"""The options of `@test(...)`, validated like a data case's fields, and the field types both share.

Kept apart from the data-file formats (`agent_health.loader.formats`) so that eval files written in
Python do not build the data-case models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from agent_health.model.limits import CostUSD, Epochs, Timeout, no_bool
from agent_health.model.validation import describe_errors

__all__ = [
    "CaseModel",
    "CostUSD",
    "Epochs",
    "Strings",
    "TestOptions",
    "Timeout",
    "check_options",
    "no_bool",
    "one_or_many",
]


def one_or_many(value: Any) -> Any:
    """A lone string or object where a list is expected is a one-element list."""
    if isinstance(value, (str, bytes, Mapping)):
        return [value]
    return value


Strings = Annotated[tuple[str, ...], BeforeValidator(one_or_many)]


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
    max_cost_usd: CostUSD | None = None


def check_options(**options: Any) -> TestOptions:
    """`@test` options validated; raises ValueError naming the option."""
    try:
        return TestOptions.model_validate(options)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc)) from None
