"""Numbers a pipeline deployment sets through environment variables (sensor interval, partitions
per run, gate thresholds, ...), read the one way every setting of the library is: finite, within
a documented bound, and a ConfigError naming the variable and the bound otherwise."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agent_health.errors import ConfigError
from agent_health.model.limits import check_number


def env_number(
    name: str,
    default: float | None,
    low: float,
    high: float,
    *,
    whole: bool = False,
    environ: Mapping[str, str] | None = None,
) -> float | None:
    """$`name` as a finite number in [low, high] (whole when `whole`), or `default` when unset or
    blank. Raises ConfigError naming the variable and the bound."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    try:
        return check_number(raw, f"${name}", low, high, whole)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def env_whole(
    name: str, default: int | None, low: int, high: int, *, environ: Mapping[str, str] | None = None
) -> int | None:
    """$`name` as a whole number in [low, high], or `default` (see `env_number`)."""
    value = env_number(name, default, low, high, whole=True, environ=environ)
    return None if value is None else int(value)
