"""Secrets in agent settings: environment-variable references, and redaction.

A setting value may reference an environment variable instead of holding a secret:
`{"env": "NAME"}` (whole value) or `"Bearer ${NAME}"` (inside a string). Every referenced value is
treated as a secret (scrubbed wherever it appears, even in the agent's output) unless marked
`{"env": "NAME", "secret": False}`, for values such as a model name. References are resolved
only when a connector is built, so configurations, partitions and the Dagster UI keep the
reference, never the value. Every resolved value, and every value of a sensitive header or
auth field, is collected in a `SecretSet` that connectors use to scrub raw events, results and
error messages before anything is stored or logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agent_health.errors import ConfigError

REDACTED = "[REDACTED]"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Header names whose values are credentials whatever their origin.
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-amz-security-token",
        "x-auth-token",
    }
)
_SENSITIVE_KEY = re.compile(r"(secret|password|passwd|token|api[_-]?key|authorization|credential)", re.I)
_MIN_SECRET_LEN = 4  # shorter values would redact ordinary words


def is_env_ref(value: Any) -> bool:
    """`{"env": NAME}`, optionally with `"secret": False` for a value that is not secret."""
    return isinstance(value, Mapping) and isinstance(value.get("env"), str) and set(value) <= {"env", "secret"}


class SecretSet:
    """Secret values known to one connector; `scrub` replaces them anywhere in a JSON-like value."""

    def __init__(self, values: Iterable[str] = ()):
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for v in values:
            self.add(v)

    def add(self, value: Any) -> None:
        if isinstance(value, str) and len(value) >= _MIN_SECRET_LEN and value not in self._values:
            self._values.add(value)
            self._pattern = None

    def __bool__(self) -> bool:
        return bool(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def scrub_text(self, text: str) -> str:
        if not self._values or not text:
            return text
        if self._pattern is None:  # longest first so a secret containing another is replaced whole
            alts = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in alts))
        return self._pattern.sub(REDACTED, text)

    def scrub(self, value: Any) -> Any:
        """A copy of `value` (str, dict, list, tuple, scalars) with every secret replaced."""
        if not self._values:
            return value
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {self.scrub_text(k) if isinstance(k, str) else k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub(v) for v in value)
        return value


def resolve_env_refs(
    value: Any, setting: str, secrets: SecretSet | None = None, environ: Mapping[str, str] | None = None
) -> Any:
    """Resolve `{"env": NAME}` and `${NAME}` references in a settings value.

    Resolved values are added to `secrets`. A missing variable is a ConfigError naming the setting
    and the variable (never its value).
    """
    env = os.environ if environ is None else environ

    def lookup(name: str, where: str, secret: bool = True) -> str:
        if name not in env:
            raise ConfigError(f"setting {where}: environment variable {name} is not set")
        found = env[name]
        if secrets is not None and secret:
            secrets.add(found)
        return found

    def walk(v: Any, where: str) -> Any:
        if is_env_ref(v):
            return lookup(v["env"], where, v.get("secret", True) is not False)
        if isinstance(v, str) and "${" in v:
            return _REF.sub(lambda m: lookup(m.group(1), where), v)
        if isinstance(v, Mapping):
            return {k: walk(x, f"{where}.{k}") for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x, f"{where}[{i}]") for i, x in enumerate(v)]
        return v

    return walk(value, setting)


def collect_sensitive(headers: Mapping[str, Any], secrets: SecretSet) -> None:
    """Treat the values of credential-bearing headers as secrets even when written literally."""
    for name, value in headers.items():
        if name.lower() in SENSITIVE_HEADERS or _SENSITIVE_KEY.search(name):
            secrets.add(str(value))
            if isinstance(value, str) and " " in value:  # "Bearer abc": the token alone too
                secrets.add(value.split(" ", 1)[1])


def redact_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """Headers safe to store: credential-bearing values replaced by REDACTED."""
    return {
        k: (REDACTED if k.lower() in SENSITIVE_HEADERS or _SENSITIVE_KEY.search(k) else v) for k, v in headers.items()
    }


def display_value(value: Any) -> Any:
    """A settings value for display (CLI, Dagster): env references shown as `${NAME}`."""
    if is_env_ref(value):
        return "${" + value["env"] + "}"
    if isinstance(value, Mapping):
        return {
            k: (
                REDACTED
                if isinstance(k, str) and _SENSITIVE_KEY.search(k) and not _is_ref_only(x)
                else display_value(x)
            )
            for k, x in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [display_value(x) for x in value]
    return value


def _is_ref_only(value: Any) -> bool:
    return is_env_ref(value) or (isinstance(value, str) and bool(_REF.fullmatch(value)))


# -- logs -------------------------------------------------------------------------------
# Transport libraries log request lines (httpx logs every URL at INFO); a secret in a query string
# would reach the user's logs. Every connector registers its secrets here, and a filter on those
# loggers scrubs records before any handler sees them.
_LOG_SECRETS = SecretSet()
_FILTERED_LOGGERS = (
    "httpx",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.connection",
    "httpcore.proxy",
    "botocore.auth",
    "botocore.endpoint",
    "agent_health",
)


class _RedactingFilter:
    def filter(self, record: Any) -> bool:
        if _LOG_SECRETS:
            message = record.getMessage()
            scrubbed = _LOG_SECRETS.scrub_text(message)
            if scrubbed != message:
                record.msg, record.args = scrubbed, ()
        return True


_FILTER = _RedactingFilter()


def register_log_secrets(secrets: SecretSet) -> None:
    """Scrub these secrets from transport and agent_health log records from now on."""
    import logging

    if not secrets:
        return
    for value in secrets._values:
        _LOG_SECRETS.add(value)
    for name in _FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
