"""Using a Dagster beta or preview API on purpose, with its warning silenced at the call site only.

Each use says why the API is essential; every other BetaWarning or PreviewWarning still shows."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import BetaWarning, PreviewWarning


@contextmanager
def beta_api(why: str) -> Iterator[None]:
    """Silence Beta/Preview warnings of the Dagster calls inside. `why` documents the choice."""
    del why  # the reason is for the reader of the call site
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        yield
