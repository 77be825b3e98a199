"""Fixture resolution and teardown for one test, and calling user functions sync or async."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from agent_health.errors import FixtureError
from agent_health.loader.registry import FixtureDef, parameters


async def call(fn: Callable[..., Any], kwargs: dict[str, Any], *, executor: Executor | None = None) -> Any:
    """Call a user function; coroutines are awaited, sync functions run inline or, given an
    executor, in a worker thread that sees the caller's context variables (the test context)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    if executor is not None:
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(ctx.run, fn, **kwargs))
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


class FixtureScope:
    """Resolves fixtures by parameter name for one test, remembering teardowns (LIFO)."""

    def __init__(self, builtins: dict[str, Any], defs: dict[str, FixtureDef], test_name: str):
        self.values: dict[str, Any] = dict(builtins)
        self._defs = defs
        self._test = test_name
        self._teardowns: list[tuple[str, Any]] = []

    async def kwargs_for(self, fn: Callable[..., Any]) -> dict[str, Any]:
        return {p: await self.get(p, ()) for p in parameters(fn)}

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
                value = await gen.__anext__()
                self._teardowns.append((name, gen))
            elif inspect.isgeneratorfunction(fdef.fn):
                gen = fdef.fn(**kwargs)
                value = next(gen)
                self._teardowns.append((name, gen))
            else:
                value = await call(fdef.fn, kwargs)
        except FixtureError:
            raise
        except Exception as exc:
            raise FixtureError(f"fixture {name!r} failed during setup: {type(exc).__name__}: {exc}") from exc
        self.values[name] = value
        return value

    async def teardown(self) -> list[str]:
        """Run every teardown, last set up first; return the errors (never raise)."""
        errors = []
        while self._teardowns:
            name, gen = self._teardowns.pop()
            try:
                if inspect.isasyncgen(gen):
                    await gen.__anext__()
                else:
                    next(gen)
                errors.append(f"fixture {name!r} yielded more than once")
            except (StopIteration, StopAsyncIteration):
                pass
            except Exception as exc:
                errors.append(f"fixture {name!r} failed during teardown: {type(exc).__name__}: {exc}")
        return errors
