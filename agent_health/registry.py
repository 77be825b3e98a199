"""Registries of pluggable kinds: judge providers, connectors, reporters and result stores.

Each registry lives with its package (`agent_health/judges/registry.py`, ...) and maps a kind name
to a `module:attribute` target. Built-in kinds are listed there; third-party packages add kinds
through entry points in the registry's group (`agent_health.judges`, `agent_health.connectors`,
`agent_health.reporters`, `agent_health.stores`), e.g. in their pyproject.toml:

    [project.entry-points."agent_health.connectors"]
    my-agent = "my_package.connector:MyConnector"

Entry points are read on the first lookup of a kind that is not built in (or when every kind is
listed), so a run that uses built-in kinds never scans installed packages; a target is imported
only when its kind is used. See docs/extending.md.
"""

from __future__ import annotations

import difflib
import importlib
import threading
import warnings
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from agent_health.errors import ConfigError

# Where each registry lives, by entry point group. The configuration is validated below these
# packages in the layers (tests/core/test_layers.py), so it finds a registry by name; every registry
# module imports nothing but this one, so the lookup loads no connector, judge, store or reporter.
REGISTRY_MODULES: dict[str, str] = {
    "agent_health.judges": "agent_health.judges.registry",
    "agent_health.connectors": "agent_health.connectors.registry",
    "agent_health.reporters": "agent_health.reporters.registry",
    "agent_health.stores": "agent_health.stores.registry",
}


class Plugin:
    """A kind added by an installed distribution (an entry point)."""

    __slots__ = ("distribution", "target")

    def __init__(self, target: str, distribution: str):
        self.target, self.distribution = target, distribution


class Registry:
    """Kind name -> `module:attribute`, built-in kinds first, then entry points of `group`."""

    def __init__(self, what: str, group: str, builtins: Mapping[str, str]):
        self.what = what  # how messages name a kind: "judge provider", "connector", ...
        self.group = group
        self.builtins = dict(builtins)
        self._plugins: dict[str, Plugin] | None = None
        self._clashes: dict[str, list[str]] = {}  # kind -> distributions that disagree on its target
        self._lock = threading.Lock()

    # -- lookups ---------------------------------------------------------------------
    def __contains__(self, kind: object) -> bool:
        if not isinstance(kind, str):
            return False
        return kind in self.builtins or kind in self.plugins()

    def kinds(self) -> list[str]:
        """Every known kind: the built-in ones in their order, then the plugins' sorted."""
        return [*self.builtins, *sorted(k for k in self.plugins() if k not in self.builtins)]

    def plugins(self) -> dict[str, Plugin]:
        """Kinds added by installed distributions (entry points), read once per process."""
        if self._plugins is None:
            with self._lock:
                if self._plugins is None:
                    self._plugins = self._scan()
        return self._plugins

    @property
    def scanned(self) -> bool:
        """Whether the installed packages' entry points have been read (a run on built-in kinds never does)."""
        return self._plugins is not None

    def target(self, kind: str, setting: str = "") -> str:
        """The `module:attribute` of `kind`; a ConfigError listing the known kinds when unknown."""
        if kind in self.builtins:
            return self.builtins[kind]
        plugin = self.plugins().get(kind)
        if plugin is None:
            raise ConfigError(self.unknown(kind, setting))
        if kind in self._clashes:
            raise ConfigError(
                f"{setting + ': ' if setting else ''}{self.what} {kind!r} is declared differently by "
                f"{' and '.join(sorted(self._clashes[kind]))} (entry point group {self.group}); uninstall one"
            )
        return plugin.target

    def load(self, kind: str, setting: str = "") -> Any:
        """The object `kind` names, imported now; a ConfigError naming the plugin if it cannot be."""
        target = self.target(kind, setting)
        module, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except Exception as exc:
            if kind in self.builtins:
                raise
            plugin = self.plugins()[kind]
            raise ConfigError(
                f"{self.what} {kind!r} from {plugin.distribution} ({self.group} = {target}) cannot be "
                f"loaded: {type(exc).__name__}: {exc}"
            ) from exc
        return obj

    def unknown(self, kind: object, setting: str = "") -> str:
        """The message for an unknown kind: the setting, the kind, a close match, the known kinds."""
        known = self.kinds()
        hint = ""
        if isinstance(kind, str):
            close = difflib.get_close_matches(kind, known, n=1, cutoff=0.7)
            hint = f"; did you mean {close[0]!r}?" if close else ""
        where = f"{setting}: " if setting else ""
        return (
            f"{where}unknown {self.what} {kind!r}{hint} (known: {', '.join(known)}; more come from "
            f"installed packages' {self.group!r} entry points)"
        )

    def check(self, kind: str, setting: str = "") -> str:
        """`kind` when known, else a ValueError (pydantic validators) listing the known kinds."""
        if kind not in self:
            raise ValueError(self.unknown(kind, setting))
        return kind

    def reset(self) -> None:
        """Forget the entry points read so far (after installing a package in a running process)."""
        with self._lock:
            self._plugins = None
            self._clashes = {}

    # -- entry points ----------------------------------------------------------------
    def _scan(self) -> dict[str, Plugin]:
        found: dict[str, Plugin] = {}
        for ep in entry_points(group=self.group):
            dist = getattr(ep, "dist", None)
            who = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
            if ep.name in self.builtins:
                warnings.warn(
                    f"{who} declares {self.what} {ep.name!r} (entry point group {self.group}); the built-in "
                    f"{ep.name!r} is kept",
                    stacklevel=2,
                )
                continue
            seen = found.get(ep.name)
            if seen is not None and seen.target != ep.value:
                self._clashes.setdefault(ep.name, [seen.distribution]).append(who)
                continue
            found.setdefault(ep.name, Plugin(ep.value, who))
        return found


def registry(group: str) -> Registry:
    """The registry of an entry point group (`agent_health.judges`, ...), importing only its module."""
    module = REGISTRY_MODULES.get(group)
    if module is None:
        raise KeyError(f"no registry for {group!r}; known: {', '.join(REGISTRY_MODULES)}")
    reg: Registry = importlib.import_module(module).REGISTRY
    return reg


__all__ = ["REGISTRY_MODULES", "Plugin", "Registry", "registry"]
