"""Fixture resolution and teardown for one test. Sync fixtures (setup and teardown of generator
fixtures too) run in worker threads, never on the event loop."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from agent_health.errors import FixtureError
from agent_health.interrupts import describe, must_propagate
from agent_health.loader.registry import FixtureDef, parameters
from agent_health.offloop import call, run_off_loop

_DONE = object()  # what a generator fixture's teardown step returns when it finished properly


def _step(gen: Any) -> Any:
    """One `next()` of a sync generator fixture; `_DONE` when it stopped."""
    try:
        return next(gen)
    except StopIteration:
        return _DONE


async def _astep(gen: Any) -> Any:
    try:
        return await gen.__anext__()
    except StopAsyncIteration:
        return _DONE


class FixtureScope:
    """Resolves fixtures by parameter name for one test, remembering teardowns (LIFO)."""

    def __init__(self, builtins: dict[str, Any], defs: dict[str, FixtureDef], test_name: str):
        self.values: dict[str, Any] = dict(builtins)
        self._defs = defs
        self._test = test_name
        self._teardowns: list[tuple[str, Any]] = []

    def made_kwargs(self, fn: Callable[..., Any]) -> dict[str, Any] | None:
        """`kwargs_for(fn)` when every fixture it asks for is made already (the built-in ones,
        all a data test's body asks for): no coroutine to run. None when one is still to make."""
        values = self.values
        kwargs = {}
        for p in parameters(fn):
            if p not in values:
                return None
            kwargs[p] = values[p]
        return kwargs

    @property
    def holds_teardowns(self) -> bool:
        """Whether a fixture made for this test has a teardown to run (`teardown`)."""
        return bool(self._teardowns)

    async def kwargs_for(self, fn: Callable[..., Any]) -> dict[str, Any]:
        values, kwargs = self.values, {}
        for p in parameters(fn):  # the built-in fixtures and those made already are not awaited for
            kwargs[p] = values[p] if p in values else await self.get(p, ())
        return kwargs

    async def get(self, name: str, chain: tuple[str, ...]) -> Any:
        if name in self.values:
            return self.values[name]
        if name in chain:
            raise FixtureError(f"test {self._test!r}: fixture cycle {' -> '.join((*chain, name))}")
        fdef = self._defs.get(name)
        if fdef is None:
            raise FixtureError(
                f"test {self._test!r} asks for unknown fixture {name!r}; "
                f"known: {', '.join(sorted({*self.values, *self._defs}))}"
            )
        kwargs = {p: await self.get(p, (*chain, name)) for p in parameters(fdef.fn)}
        try:
            if inspect.isasyncgenfunction(fdef.fn):
                gen = fdef.fn(**kwargs)
                value = await _astep(gen)
                self._teardowns.append((name, gen))
            elif inspect.isgeneratorfunction(fdef.fn):
                gen = fdef.fn(**kwargs)  # creating a generator runs none of its code
                value = await run_off_loop(_step, gen)
                self._teardowns.append((name, gen))
            else:
                value = await call(fdef.fn, **kwargs)
            if value is _DONE:
                # Wrapped just below, as any setup failure is.
                raise RuntimeError("the generator fixture never yielded a value")  # noqa: TRY301
        except FixtureError:
            raise
        except BaseException as exc:  # sys.exit() in a fixture errors the test, not the run
            if must_propagate(exc):
                raise
            raise FixtureError(f"fixture {name!r} failed during setup: {describe(exc, located=False)}") from exc
        self.values[name] = value
        return value

    async def teardown(self, deadline: float | None = None) -> list[str]:
        """Run every teardown, last set up first, each finished by `deadline` (loop time); return
        the errors (never raise). A teardown past the deadline is abandoned, not waited for."""
        errors = []
        while self._teardowns:
            name, gen = self._teardowns.pop()
            try:
                async with asyncio.timeout_at(deadline):
                    if inspect.isasyncgen(gen):
                        done = await _astep(gen)
                    else:
                        done = await run_off_loop(_step, gen)
                if done is not _DONE:
                    errors.append(f"fixture {name!r} yielded more than once")
            except TimeoutError:
                errors.append(f"fixture {name!r} did not finish its teardown in time")
            except BaseException as exc:
                if must_propagate(exc):
                    raise
                errors.append(f"fixture {name!r} failed during teardown: {describe(exc, located=False)}")
        return errors
