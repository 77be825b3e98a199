"""The CLI options of the run settings, derived from their declarations on `RunSettings`
(`agent_health.model.settings.Declared`): a setting declared with a flag for a command is an
option of that command, with its type, bounds, choices and help, and nowhere else."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from agent_health.model import limits
from agent_health.model.settings import DeclaredSetting, declared_settings, flag_name

__all__ = ["limit_option", "setting_options", "settings_for"]

F = TypeVar("F", bound=Callable[..., Any])


def settings_for(command: str) -> tuple[DeclaredSetting, ...]:
    """The declared settings `command` (`run`, `rejudge`) takes as options."""
    return tuple(d for d in declared_settings() if d.declared.flag and command in d.declared.commands)


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """click's FloatRange lets `nan` through (every comparison with it is false)."""
    if value is not None and value != value:
        raise click.BadParameter("expected a finite number, not nan")
    return value


def _whole(bound: float | None) -> int | None:
    return None if bound is None else int(bound)


def _option(d: DeclaredSetting) -> tuple[list[Callable[[F], F]], dict[str, Callable[[Any], Any]]]:
    """The click option(s) of one setting, and how each one's value becomes an override."""
    flag = str(d.declared.flag)
    decls = [flag, *([d.declared.short] if d.declared.short else []), flag_name(flag)]
    kwargs: dict[str, Any] = {"help": d.help, "metavar": d.declared.metavar}
    convert: Callable[[Any], Any] = lambda value: value  # noqa: E731
    lo, hi, lo_open = d.bounds
    if d.annotation is bool:
        kwargs.update(is_flag=True, default=None)
    elif d.choices is not None:
        kwargs["type"] = click.Choice(d.choices)
        literal = d.annotation.__args__[0] if d.multiple else d.annotation
        values = {str(v): v for v in literal.__args__}  # Literal[0, 1] takes the numbers back
        if not d.multiple:
            convert = lambda value: None if value is None else values[value]  # noqa: E731
    elif d.annotation is int:
        kwargs["type"] = click.IntRange(min=_whole(lo), max=_whole(hi))
    elif d.annotation is float:
        kwargs.update(type=click.FloatRange(min=lo, max=hi, min_open=lo_open), callback=_finite)
    if d.multiple:
        kwargs["multiple"] = True
        convert = lambda value: tuple(value) or None  # noqa: E731
    options: list[Callable[[F], F]] = [click.option(*decls, **kwargs)]
    converters = {flag_name(flag): convert}
    if d.declared.off_flag:
        off = d.declared.off_flag
        options.append(click.option(off, flag_name(off), is_flag=True, default=None, help=d.declared.off_help))
        converters[flag_name(off)] = lambda value: value or None
    return options, converters


def setting_options(command: str) -> Callable[[F], F]:
    """Add an option for each declared setting `command` takes; the command function receives
    their values as one `given` mapping of `build_settings` overrides (None: not given)."""

    def decorate(func: F) -> F:
        converters: dict[str, Callable[[Any], Any]] = {}
        options: list[Callable[[F], F]] = []
        for d in settings_for(command):
            more, convert = _option(d)
            options += more
            converters.update(convert)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: convert(kwargs.pop(name)) for name, convert in converters.items()}
            return func(*args, given=given, **kwargs)

        out: Any = wrapper
        for option in reversed(options):
            out = option(out)
        return out  # type: ignore[no-any-return]

    return decorate


def limit_option(default: int, help: str) -> Callable[[F], F]:
    """`--limit N`: how many rows a command's table lists (bounded like every table, docs/limits.md)."""
    return click.option(
        "--limit",
        type=click.IntRange(min=1, max=limits.TABLE_ROWS_MAX),
        default=default,
        show_default=True,
        help=help,
    )
