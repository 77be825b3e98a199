"""The bound of every number an eval file, the configuration, the environment or the command line
can set, in one place (docs/limits.md lists them; a test checks that it lists every one).

A value outside its bound, NaN or an infinity is an error when the file or the configuration is
loaded, naming the file, the test or the setting, and the bound. The bounds are far above any
sensible value: they exist so that a typo (`epochs: 1000000000`) or `Infinity` cannot start a run
that never ends or never times out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

EPOCHS_MAX = 1_000  # trials of one test
TURNS_MAX = 100  # turns of one conversation (scripted turns, a simulated user's max_turns)
TIMEOUT_MAX_S = 86_400.0  # seconds: a test's, an agent run's, a request's, a judge call's timeout
CONCURRENCY_MAX = 1_024  # tests (or judge calls, or reads) in flight at once
RETRIES_MAX = 100  # retries of one request (agent, judge, store)
BACKOFF_MAX_S = 3_600.0  # seconds of one backoff delay
WAIT_MAX_S = 3_600.0  # seconds a wait for spans or a store lease may last
CHARS_MAX = 10_000_000  # characters of a judge prompt limit
STEPS_MAX = 100_000  # trajectory steps a judge sees
TOOL_STEPS_MAX = 100  # model turns of an agentic judge
BYTES_MAX = 1 << 30  # bytes of one agent response, subprocess output or judge answer (1 GiB)
CONNECTIONS_MAX = 10_000  # pooled connections
BATCH_MAX = 100_000  # documents or objects per page, batch or log chunk
TOKENS_MAX = 10_000_000  # max_tokens of a judge answer
PRICE_MAX = 1_000_000.0  # USD per million tokens
COST_MAX_USD = 1_000_000.0  # USD of a spend budget (a run's, its judges', one test's cap)
BUDGET_TOKENS_MAX = 100_000_000_000  # tokens of a run's token budget
LATENCY_MAX_MS = 600_000.0  # the demo agent's simulated latency
RESAMPLES_MAX = 1_000_000  # bootstrap resamples of `agent-health compare`
TABLE_ROWS_MAX = 100_000  # rows a printed table may be asked for (`compare --limit`)
PLANNED_WORK_MAX = 100_000  # tests x epochs x agent versions of one run, without --allow-large-run
NAME_MAX = 200  # characters of a test's full name (it becomes the test id, a store key and a file name)
STORED_TEXT_MAX = 20_000  # characters of one stored message (an error, a signal's reasoning)
ARTIFACTS_RUN_MAX = 32 << 20  # characters of artifact copies one run stores, over all its results (32 MiB)


def no_bool(value: Any) -> Any:
    """pydantic's lax mode reads `true` as 1: for a timeout or a count that is a mistake, not a value."""
    if isinstance(value, bool):
        # Pydantic validator: only ValueError becomes a ValidationError.
        raise ValueError("expected a number, not a boolean")  # noqa: TRY004
    return value


def finite(value: Any) -> Any:
    """A number (or numeric text) that is not NaN or an infinity, and not a boolean."""
    no_bool(value)
    try:
        number = float(value) if isinstance(value, (int, float, str)) else 0.0
    except (ValueError, OverflowError):  # not a number at all, or a huge integer: pydantic says which
        return value
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return value


_NotBool = BeforeValidator(finite)
Epochs = Annotated[int, _NotBool, Field(ge=1, le=EPOCHS_MAX)]
Turns = Annotated[int, _NotBool, Field(ge=1, le=TURNS_MAX)]
Timeout = Annotated[float, _NotBool, Field(gt=0, le=TIMEOUT_MAX_S, allow_inf_nan=False)]
Concurrency = Annotated[int, _NotBool, Field(ge=1, le=CONCURRENCY_MAX)]
Retries = Annotated[int, _NotBool, Field(ge=0, le=RETRIES_MAX)]
Backoff = Annotated[float, _NotBool, Field(ge=0, le=BACKOFF_MAX_S, allow_inf_nan=False)]
Wait = Annotated[float, _NotBool, Field(ge=0, le=WAIT_MAX_S, allow_inf_nan=False)]
Chars = Annotated[int, _NotBool, Field(le=CHARS_MAX)]
Bytes = Annotated[int, _NotBool, Field(gt=0, le=BYTES_MAX)]
Connections = Annotated[int, _NotBool, Field(gt=0, le=CONNECTIONS_MAX)]
CostUSD = Annotated[float, _NotBool, Field(gt=0, le=COST_MAX_USD, allow_inf_nan=False)]
BudgetTokens = Annotated[int, _NotBool, Field(ge=1, le=BUDGET_TOKENS_MAX)]


_CUT = re.compile(r" \.\.\. \[cut: ([\d,]+) characters in all\]")


def cut_text(text: str) -> str:
    """`text` cut to `STORED_TEXT_MAX` characters, saying how long it was (a 20 MB assertion
    message is stored as 20,000 characters, not copied whole into every field that quotes it)."""
    if len(text) <= STORED_TEXT_MAX:
        return text
    earlier = _CUT.search(text)  # a message quoting one cut before keeps the first length
    total = max(len(text), int(earlier.group(1).replace(",", ""))) if earlier else len(text)
    marker = f" ... [cut: {total:,} characters in all]"
    return text[: STORED_TEXT_MAX - len(marker)] + marker


StoredText = Annotated[str, AfterValidator(cut_text)]

# Numbers inside free-form settings mappings (store, trace source, judge provider), by key:
# (lowest, highest, whole number). Checked when the configuration loads.
SETTING_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "timeout_s": (0.001, TIMEOUT_MAX_S, False),
    "max_attempts": (1, RETRIES_MAX + 1, True),
    "max_retries": (0, RETRIES_MAX, True),
    "max_pool_connections": (1, CONNECTIONS_MAX, True),
    "read_concurrency": (1, CONCURRENCY_MAX, True),
    "log_skew_s": (0, WAIT_MAX_S, False),
    "log_lease_s": (0, WAIT_MAX_S, False),
    "log_compact_at": (1, BATCH_MAX, True),
    "page_size": (1, BATCH_MAX, True),
    "mget_size": (1, BATCH_MAX, True),
    "batch_size": (1, BATCH_MAX, True),
    "window_slack_s": (0, WAIT_MAX_S, False),
    "max_tokens": (1, TOKENS_MAX, True),
    "max_response_bytes": (1, BYTES_MAX, True),
    "temperature": (0, 2, False),
    "latency_ms": (0, LATENCY_MAX_MS, False),
}


def check_number(value: Any, where: str, low: float, high: float, whole: bool = False) -> float:
    """`value` as a finite number in [low, high] (a whole one when `whole`); ValueError naming
    `where` and the bound otherwise. Numeric text ("30") is read as a number."""
    kind = "a whole number" if whole else "a number"
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: expected {kind} from {low:g} to {high:g}, got {_short(value)}") from None
    if not math.isfinite(number) or not low <= number <= high or (whole and number != int(number)):
        raise ValueError(f"{where}: expected {kind} from {low:g} to {high:g}, got {_short(value)}")
    return number


def check_setting_numbers(settings: Mapping[str, Any], where: str) -> None:
    """Check every number of a settings mapping whose key has a bound (`SETTING_BOUNDS`)."""
    for key, value in settings.items():
        if key in SETTING_BOUNDS and value is not None:
            low, high, whole = SETTING_BOUNDS[key]
            check_number(value, f"{where}.{key}", low, high, whole)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's 4,300-digit conversion limit
        return "a number too long to show"
    return text if len(text) <= 40 else f"{text[:37]}... ({len(text)} characters)"
