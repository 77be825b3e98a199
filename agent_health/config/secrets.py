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

import base64
import json
import logging
import os
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar, Union, get_args, get_origin
from urllib.parse import quote, quote_plus, unquote, urlsplit

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from agent_health.errors import ConfigError
from agent_health.model.json_bytes import model_json
from agent_health.model.result import TestResult
from agent_health.model.run import RunResult

REDACTED = "[REDACTED]"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_URL_START = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")
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
_MIN_SECRET_LEN = 4  # no encoded form shorter than this is searched for
# The most characters one regular-expression call scans: the engine holds the interpreter lock for
# the whole call (about 20 ms here), so a long text is searched window by window and other threads,
# the event loop's among them, run in between.
_WINDOW = 1 << 18
_MIN_EMBEDDED_LEN = 8  # base64 inside longer text is looked for when the secret has this many bytes
M = TypeVar("M", bound=BaseModel)

# A secret shorter than this, or a common word, is never searched for inside text: LocalStack's
# `test` or MinIO's `minioadmin` would rewrite every test id, suite name and sentence holding the
# word. Such a secret is still kept out whole: a value that is exactly the secret, headers (by
# name), URL userinfo and settings dumps. docs/deploy.md (Secrets) says the same to users.
SAFE_SECRET_LENGTH = 8
_WORDLIKE_BELOW = 16  # letters alone, or digits alone, shorter than this read as a word or a number
# Credentials that local stand-ins (LocalStack, MinIO, database and search images) ship with.
COMMON_CREDENTIALS = frozenset(
    {"test", "testing", "minioadmin", "localstack", "admin", "administrator", "password", "passwd", "secret",
     "changeme", "root", "guest", "user", "demo", "dummy", "example", "default", "opensearch", "elastic",
     "postgres", "foobar", "letmein", "qwerty"}
)  # fmt: skip
# The userinfo of a URL (`scheme://user:password@host`), removed from any text whatever is configured.
# Up to the authority's last '@', as urlsplit reads it: a password with a raw '@' leaks no part.
_USERINFO = re.compile(r"://[^\s/?#\"'<>]+@")
# Fields that name things (store keys, partition keys, filters, joins): a result's are never
# rewritten, so a secret that is a word of a suite's or a test's name cannot move or corrupt it.
IDENTIFIER_FIELDS = frozenset(
    {"test_id", "suite", "source_file", "agent", "labels", "content_hash", "eval_run_id", "run_id", "trace_id",
     "span_id", "schema_version"}
)  # fmt: skip
_TOP_IDENTIFIERS = IDENTIFIER_FIELDS | {"name", "id"}  # a result's or a case's own name and id
_log = logging.getLogger("agent_health.secrets")
_warned: set[str] = set()  # weak secrets already warned about (once per process)


def is_weak_secret(value: str) -> bool:
    """True for a secret that ordinary text may contain: short, a common word or a plain number."""
    v = value.strip()
    return (
        len(v) < SAFE_SECRET_LENGTH
        or v.lower() in COMMON_CREDENTIALS
        or (len(v) < _WORDLIKE_BELOW and (v.isalpha() or v.isdigit()))
    )


_SLASHES_LOOKED_AT = 8  # slashes looked at one by one before searching for "://" at once


def _may_hold_userinfo(text: str) -> bool:
    """Whether `text` has an `@` and a `://`, as a URL with userinfo has (`"@" in text and "://"
    in text`). A one-character search is a `memchr` (0.07 us over a result's 4 KB of JSON) where
    `"://"` is searched character by character (3.5 us), and this runs on every run's and every
    result's JSON; an `@` is in each (the agent's `KEY@VERSION`), a slash in few and `://` in
    fewer, so the slashes are found one by one and the few first looked at."""
    if "@" not in text:
        return False
    at = text.find("/", 1)
    for _ in range(_SLASHES_LOOKED_AT):
        if at < 0:
            return False
        if text[at - 1] == ":" and text.startswith("/", at + 1):
            return True
        at = text.find("/", at + 1)
    return at >= 0 and text.find("://", at - 1) >= 0


def redact_userinfo(text: str) -> str:
    """`text` with the userinfo of every URL in it replaced (`http://[REDACTED]@host`)."""
    return _USERINFO.sub(f"://{REDACTED}@", text) if _may_hold_userinfo(text) else text


def redact_url(text: str) -> str:
    """`text` (a URL, or a message quoting URLs) with the userinfo of every URL in it removed
    (`http://user:pw@host` -> `http://host`): for locations shown in messages, where the
    credential is not worth a placeholder."""
    return _USERINFO.sub("://", text) if _may_hold_userinfo(text) else text


def url_password(value: Any) -> str | None:
    """The password of a URL's userinfo (`scheme://user:password@host`), if it has one."""
    if not isinstance(value, str) or not _may_hold_userinfo(value):
        return None
    try:
        return urlsplit(value.strip()).password or None
    except ValueError:
        return None


def _warn_weak(value: str, setting: str | None) -> None:
    if value in _warned:
        return
    _warned.add(value)
    _log.warning(
        "warning: the secret of %s is short or a common word (%d characters), so it is not searched for "
        "inside text (that would rewrite ordinary words, ids and names); it is still kept out "
        "of headers, URLs and settings dumps, and a value that is exactly it is redacted. Use a long "
        "random value for real credentials.",
        setting or "a configured credential",
        len(value),
    )


def is_env_ref(value: Any) -> bool:
    """`{"env": NAME}`, optionally with `"secret": False` for a value that is not secret."""
    return isinstance(value, Mapping) and isinstance(value.get("env"), str) and set(value) <= {"env", "secret"}


def encoded_forms(secret: str) -> tuple[set[str], set[str]]:
    """(forms matched ignoring case, forms matched exactly) under which `secret` may be stored.

    Ignoring case: the value, its JSON-escaped text and its percent-encodings (`quote`,
    `quote_plus`; any hex case). Exactly: base64 and base64url, padded or not, of the value alone
    and of the value inside any longer text (`user:secret` of basic auth, `Bearer secret`, a JSON
    body): for each of the three byte alignments, the run of base64 characters that only the
    secret's own bytes determine.
    """
    raw = secret.encode()
    folded = {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    exact: set[str] = set()
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        whole = enc(raw).decode()
        exact |= {whole, whole.rstrip("=")}
        if len(raw) >= _MIN_EMBEDDED_LEN:
            for offset in range(3):
                text = enc(b"\0" * offset + raw).decode()
                first = -(-8 * offset // 6)  # the first character made of the secret's bits alone
                last = (8 * (offset + len(raw))) // 6  # one past the last such character
                exact.add(text[first:last])
    return {f for f in folded if len(f) >= _MIN_SECRET_LEN}, {e for e in exact if len(e) >= _MIN_SECRET_LEN}


class SecretSet:
    """Secret values known to one connector (or to the process); `scrub` replaces them, in every
    form `encoded_forms` lists, anywhere in a JSON-like value."""

    def __init__(self, values: Iterable[str] = ()):
        self._values: set[str] = set()  # searched for anywhere, in every encoded form
        self._whole: dict[str, str | None] = {}  # weak secrets, matched as whole values -> their setting
        self._whole_longest = 0  # a text longer than this is none of them
        self._forms: _Forms | None = None  # made when first searched, dropped when a secret is added
        for v in values:
            self.add(v)

    def add(self, value: Any, setting: str | None = None) -> None:
        """Treat `value` as a secret; `setting` names where it came from (for the weak-secret warning)."""
        if not isinstance(value, str) or not value.strip() or value in self._values or value in self._whole:
            return
        if is_weak_secret(value):
            self._whole[value] = setting
            self._whole_longest = max(self._whole_longest, len(value))
            _warn_weak(value, setting)
            return
        self._values.add(value)
        self._forms = None

    def update(self, other: SecretSet) -> None:
        for value in other._values:
            self.add(value)
        for value, setting in other._whole.items():
            self.add(value, setting)

    def __bool__(self) -> bool:
        return bool(self._values or self._whole)

    def __contains__(self, value: object) -> bool:
        return value in self._values or value in self._whole

    @property
    def pattern(self) -> re.Pattern[str]:
        """Every strong secret's every form (`encoded_forms`), longest first."""
        return self._compiled().pattern

    def _compiled(self) -> _Forms:
        # one object made at once: a search in a worker thread never sees half of it
        forms = self._forms
        if forms is None:
            folded: set[str] = set()
            exact: set[str] = set()
            for value in self._values:
                f, e = encoded_forms(value)
                folded |= f
                exact |= e
            # longest first, so a secret containing another is replaced whole
            alts = [(len(x), f"(?i:{re.escape(x)})") for x in folded] + [(len(x), re.escape(x)) for x in exact]
            forms = self._forms = _Forms(
                pattern=re.compile("|".join(a for _, a in sorted(alts, key=lambda t: -t[0]))),
                longest=max((len(x) for x in folded | exact), default=0),
                folded=_innermost({x.lower() for x in folded}),
                exact=_innermost(exact),
                ascii=all(x.isascii() for x in folded),
            )
        return forms

    def _search(self, text: str) -> bool:
        """Whether a strong secret's form is in `text`, searched one window at a time."""
        forms, n = self._compiled(), len(text)
        if n <= _WINDOW:
            return _found(forms, text)
        # a form starting in a window ends at most `longest` past it: windows overlap by that much
        return any(_found(forms, text[at : at + _WINDOW + forms.longest]) for at in range(0, n, _WINDOW))

    def _sub(self, text: str) -> str:
        """`text` with every strong secret's form replaced, as `pattern.sub` would, one window at a
        time: a form starting in a window is matched whole (the scan sees `longest` past it), and
        the next window starts where the last form ended. A text without any is returned as it
        is after a search (`_found`), never scanned by the expression."""
        if not self._search(text):
            return text
        forms, n = self._compiled(), len(text)
        pattern = forms.pattern
        if n <= _WINDOW:
            return pattern.sub(REDACTED, text)
        out: list[str] = []
        done = at = 0  # text[:done] is in `out`; the scan goes on from `at`
        while at < n:
            end = at + _WINDOW
            for m in pattern.finditer(text, at, end + forms.longest):
                if m.start() >= end:
                    break
                out += (text[done : m.start()], REDACTED)
                done = m.end()
            at = max(end, done)
        return "".join([*out, text[done:]]) if out else text

    def found_in(self, text: str) -> bool:
        """Whether scrubbing could change `text` (JSON text included: a weak secret as a whole
        JSON string, or a URL with userinfo)."""
        if not text:
            return False
        if self._values and self._search(text):
            return True
        return any(json.dumps(w, ensure_ascii=False) in text for w in self._whole) or (
            _may_hold_userinfo(text) and _USERINFO.search(text) is not None
        )

    def scrub_text(self, text: str) -> str:
        """`text` without secrets: strong ones anywhere in it, a weak one when it is the whole text,
        and the userinfo of any URL. A long text is scanned window by window (see `_WINDOW`)."""
        if not text:
            return text
        if len(text) <= self._whole_longest and text in self._whole:
            return REDACTED
        if self._values:
            text = self._sub(text)
        return redact_userinfo(text)

    def scrub(self, value: Any) -> Any:
        """A copy of `value` (str, dict, list, tuple, scalars) with every secret replaced in its
        values; the keys of a mapping are names and stay as they are."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub(v) for v in value)
        return value

    def scrub_model(self, model: M, *, piecewise: bool = False) -> M:
        """A pydantic model (a TestResult, a RunResult, a verdict) without secrets in its values.
        Identifiers (`IDENTIFIER_FIELDS`, and the model's own name and id) and fields that cannot
        hold text (literals, numbers, booleans) are never rewritten, so the result keeps its keys
        and stays valid; a field that cannot be scrubbed is emptied, never left with a secret and
        never crashing the run. The same object when nothing is to be removed (one search of the
        model's JSON tells; a TestResult keeps that JSON, so its store need not encode it again).

        `piecewise` (for a model holding megabytes of text, in a worker thread): field by field,
        text by text, each long one window by window, never the model's JSON in one piece, so no
        step holds the interpreter lock for long and the event loop keeps running."""
        text: str | None = None
        if not piecewise:
            try:
                # `model_dump_json()`'s bytes, through orjson where they are sure to be the same
                text = model_json(model).decode()
            except Exception:  # not serializable as it is (nested past pydantic's depth): scrub field by field  # noqa: BLE001
                pass
        if isinstance(model, TestResult):  # its runs' texts (their connectors' checks) are in `text` now
            _forget_runs_json(model)
        if text is not None and not self.found_in(text):
            # kept: the store need not encode a result again, nor its result a run
            if isinstance(model, (TestResult, RunResult)):
                model.remember_json(text)
            return model
        return self._scrub_fields(model, _TOP_IDENTIFIERS)

    def _scrub_fields(self, model: M, identifiers: frozenset[str]) -> M:
        updates: dict[str, Any] = {}
        for name, field in type(model).model_fields.items():
            if name in identifiers or _holds_no_text(field.annotation):
                continue
            value = getattr(model, name)
            try:
                new = self._scrub_nested(value)
            except Exception as exc:  # e.g. RecursionError on absurdly nested raw events  # noqa: BLE001
                new = _emptied(field)
                _log.warning("warning: %s.%s could not be scrubbed of secrets (%s); it was emptied",
                             type(model).__name__, name, type(exc).__name__)  # fmt: skip
            if new is not value:
                updates[name] = new
        return model.model_copy(update=updates) if updates else model

    def _scrub_nested(self, value: Any) -> Any:
        if isinstance(value, BaseModel):
            return self._scrub_fields(value, IDENTIFIER_FIELDS)
        if isinstance(value, (list, tuple)) and any(isinstance(v, BaseModel) for v in value):
            return type(value)(self._scrub_nested(v) for v in value)
        return self.scrub(value)

    def scrub_pieces(self, pieces: Sequence[str]) -> list[str]:
        """Pieces of one stream (streamed deltas) with every secret of the joined text removed,
        also one that spans pieces: the piece where it starts gets REDACTED, the others lose
        their part of it."""
        joined = "".join(pieces)
        spans = [m.span() for m in self.pattern.finditer(joined)] if self._values and self._search(joined) else []
        if not spans:
            return list(pieces)
        out, start = [], 0
        for piece in pieces:
            end = start + len(piece)
            kept, pos = [], start
            for lo, hi in spans:
                if hi <= start or lo >= end:
                    continue
                kept.append(joined[pos : max(lo, pos)] if lo > pos else "")
                if start <= lo < end:
                    kept.append(REDACTED)
                pos = max(pos, min(hi, end))
            kept.append(joined[pos:end])
            out.append("".join(kept))
            start = end
        return out


class _Forms(NamedTuple):
    """A SecretSet's forms, made for searching."""

    pattern: re.Pattern[str]  # every form, for replacing (and for a text `in` cannot search)
    longest: int  # characters of the longest form
    folded: tuple[str, ...]  # the forms matched ignoring case, lower-cased, none holding another
    exact: tuple[str, ...]  # the forms matched exactly (base64), none holding another
    ascii: bool  # every form is ASCII


def _innermost(forms: set[str]) -> tuple[str, ...]:
    """The forms that hold no other: where one that holds another is, that other is too, so
    searching for these finds a text with any."""
    kept: list[str] = []
    for form in sorted(forms, key=len):
        if not any(k in form for k in kept):
            kept.append(form)
    return tuple(kept)


def _found(forms: _Forms, text: str) -> bool:
    """Whether any form is in `text`. An ASCII text (nearly every result's JSON) is searched with
    `in`, the forms ignoring case in its lower-cased copy: the expression's alternation tries every
    form at every position, about 25 us a kilobyte of JSON for one secret, 10x slower than this.
    For ASCII text and forms, lower-casing tells the same letters apart as the expression's
    case-insensitive match; any other text, or a secret that is not ASCII (whose case-insensitive
    forms may match ASCII letters, as the Kelvin sign matches k), goes to the expression."""
    if forms.ascii and text.isascii():
        lowered = text.lower()
        return any(f in lowered for f in forms.folded) or any(e in text for e in forms.exact)
    return forms.pattern.search(text) is not None


def _holds_no_text(annotation: Any) -> bool:
    """Literal, boolean and number fields (and unions of them with None) hold no free text."""
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    return all(a is type(None) or a in (bool, int, float) or get_origin(a) is Literal for a in args)


def _emptied(field: FieldInfo) -> Any:
    if not field.is_required():
        return field.get_default(call_default_factory=True)
    return REDACTED


def _address_span(text: str) -> tuple[int, int]:
    """Where the host and port of a URL `text` lie (an empty span when `text` is not a URL). A
    `${NAME}` there is an address, shown in messages as any endpoint is, not a secret (a port is a
    short number that would be warned about as a weak secret on every run); one in the userinfo,
    the path, the query or the fragment may be a credential and stays one."""
    start = _URL_START.match(text)
    if start is None:
        return 0, -1
    end = len(text)
    for mark in "/?#":
        at = text.find(mark, start.end())
        if at != -1:
            end = min(end, at)
    return text.rfind("@", start.end(), end) + 1 or start.end(), end


def resolve_env_refs(
    value: Any, setting: str, secrets: SecretSet | None = None, environ: Mapping[str, str] | None = None
) -> Any:
    """Resolve `{"env": NAME}` and `${NAME}` references in a settings value.

    Resolved values are added to `secrets`, but for `{"env": NAME, "secret": False}` and a
    `${NAME}` in the host or port of a URL (`http://${HOST}:${PORT}/run`). A missing variable is a
    ConfigError naming the setting and the variable (never its value).
    """
    env = os.environ if environ is None else environ

    def lookup(name: str, where: str, secret: bool = True) -> str:
        if name not in env:
            raise ConfigError(f"setting {where}: environment variable {name} is not set")
        found = env[name]
        if secrets is not None and secret:
            secrets.add(found, f"{where} (${name})")
        return found

    def walk(v: Any, where: str) -> Any:
        if is_env_ref(v):
            return lookup(v["env"], where, v.get("secret", True) is not False)
        if isinstance(v, str) and "${" in v:
            host, port = _address_span(v)
            v = _REF.sub(lambda m: lookup(m.group(1), where, not (host <= m.start() and m.end() <= port)), v)
        password = url_password(v)
        if password and secrets is not None:  # a literal http://user:pw@host: the password is a secret too
            secrets.add(password, f"{where} (the URL's password)")
            secrets.add(unquote(password), f"{where} (the URL's password)")
        if isinstance(v, str):
            return v
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
            secrets.add(str(value), f"header {name}")
            if isinstance(value, str) and " " in value:  # "Bearer abc": the token alone too
                secrets.add(value.split(" ", 1)[1], f"header {name}")


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
    if isinstance(value, str):
        return redact_userinfo(value)
    return value


def _is_ref_only(value: Any) -> bool:
    return is_env_ref(value) or (isinstance(value, str) and bool(_REF.fullmatch(value)))


# -- the process's secrets ----------------------------------------------------------------
# Every credential the project resolves (agent settings, the judge's API key, the trace source's
# and the stores' passwords) is registered here; results leaving the engine, the judge cache and
# the log records below are scrubbed with them. Transport libraries log request lines (httpx
# logs every URL at INFO), so a filter on those loggers scrubs records before any handler sees them.
_LOG_SECRETS = SecretSet()
_FILTERED_LOGGERS = (
    "httpx",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.connection",
    "httpcore.proxy",
    "botocore.auth",
    "botocore.endpoint",
    "opensearch",
    "urllib3.connectionpool",
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


def known_secrets() -> SecretSet:
    """Every secret this process has resolved so far."""
    return _LOG_SECRETS


def register_secret(*values: Any, setting: str | None = None) -> None:
    """Treat these values as secrets everywhere from now on (results, reports, caches, logs).
    Call it wherever a credential is resolved; `setting` names where it came from (a weak secret,
    see `is_weak_secret`, is warned about once, naming it)."""
    added = False
    for value in values:
        if isinstance(value, str) and value.strip() and value not in _LOG_SECRETS:
            _LOG_SECRETS.add(value, setting)
            added = True
    if added:
        _install_log_filter()


def register_log_secrets(secrets: SecretSet) -> None:
    """Register every secret of `secrets` (a connector's) with the process."""
    _LOG_SECRETS.update(secrets)
    if secrets:
        _install_log_filter()


def _install_log_filter() -> None:
    for name in _FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def _forget_runs_json(result: TestResult) -> None:
    """Drop the JSON texts the result's runs remembered (their connector's check made them)."""
    if result.run is not None:
        result.run.forget_json()
    for trial in result.trials:
        if trial.run is not None:
            trial.run.forget_json()


def scrub_secrets(value: Any) -> Any:
    """`value` (str, dict, list) without any secret the process knows."""
    return _LOG_SECRETS.scrub(value)


def scrub_model(model: M, *, piecewise: bool = False) -> M:
    """A pydantic model (a TestResult, a verdict) without any secret the process knows or URL
    userinfo, its identifiers untouched (`SecretSet.scrub_model`, `piecewise` too); the same
    object when nothing is to be removed (one search over its JSON)."""
    return _LOG_SECRETS.scrub_model(model, piecewise=piecewise)


def register_credentials(credentials: Any, setting: str = "the AWS credentials (AWS_SECRET_ACCESS_KEY)") -> None:
    """Register the secret parts of resolved AWS credentials (botocore's), if any."""
    if credentials is None:
        return
    try:
        frozen = credentials.get_frozen_credentials()
    except Exception:  # resolution failed: the client call will say why  # noqa: BLE001
        return
    register_secret(frozen.secret_key, frozen.token, setting=setting)
