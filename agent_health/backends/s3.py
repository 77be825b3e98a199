"""One S3 bucket and prefix through boto3: whole-object puts (optionally conditional), gets,
paginated listings, batch deletes and parallel requests. Works with any S3-compatible server
(`endpoint_url`). Reads, writes and listings can also report the server's clock (the `Date`
header, whole seconds) and objects' `LastModified`, for callers that order writes by the one
clock every machine shares: the server's.

Settings (`store.settings` of the configuration):

    bucket                the bucket (required)
    prefix                key prefix, default "agent-health"
    endpoint_url          an S3-compatible server (MinIO, moto, ...); default AWS
    region                the bucket's region (else the AWS chain's)
    profile               an AWS profile name (credentials always come from the AWS chain)
    max_attempts          attempts per request, retries included (botocore "standard" mode), default 5
    retry_mode            botocore retry mode: standard (default), adaptive or legacy
    max_pool_connections  HTTP connections kept open, default 32
    read_concurrency      objects fetched at once by bulk reads, default 16
    timeout_s             connect and read timeout, default 30
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from agent_health.backends.shared import check_no_inline_secrets
from agent_health.config.secrets import register_credentials
from agent_health.errors import ConfigError, StoreError

RETRY_MODES = ("standard", "adaptive", "legacy")
_MISSING = ("NoSuchKey", "404", "NotFound")
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ObjectRead:
    """What one GET found: the bytes (None: no such object), the object's ETag and LastModified
    (epoch seconds), and the server's clock when it answered."""

    key: str
    data: bytes | None
    etag: str = ""
    modified: float = 0.0
    server_time: float = 0.0


@dataclass(frozen=True, slots=True)
class ObjectWritten:
    """What one PUT returned: the new object's ETag and the server's clock when it answered."""

    etag: str
    server_time: float


@dataclass(frozen=True, slots=True)
class ListedObject:
    key: str
    etag: str
    modified: float


@dataclass(frozen=True, slots=True)
class Listing:
    """Every object under a prefix, and the server's clock when the first and last pages came."""

    objects: list[ListedObject]
    first_time: float
    last_time: float


def server_time(response: Mapping[str, Any] | None) -> float:
    """The server's clock from a response's `Date` header (epoch seconds); the local clock when
    the server sent none."""
    date = ((response or {}).get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            pass
    return time.time()


def number_setting(
    settings: Mapping[str, Any], name: str, default: float, setting: str, *, minimum: float = 0, whole: bool = False
) -> float:
    """`settings[name]` (or `default`) as a number of at least `minimum`; errors name the setting."""
    raw = settings.get(name, default)
    kind = "a whole number" if whole else "a number"
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{setting}.{name}: expected {kind}, got {raw!r}") from None
    if (whole and value != int(value)) or value < minimum:
        raise ConfigError(f"{setting}.{name}: expected {kind} of at least {minimum:g}, got {raw!r}")
    return value


def _int(settings: Mapping[str, Any], name: str, default: int, setting: str) -> int:
    return int(number_setting(settings, name, default, setting, minimum=1, whole=True))


class S3Bucket:
    """Objects under `s3://bucket/prefix/`. A put is one PutObject (S3 makes an object visible
    whole or not at all), so readers never see a half-written object."""

    def __init__(self, settings: Mapping[str, Any], setting: str = "store.settings", *, client: Any = None):
        check_no_inline_secrets(settings, setting)
        bucket = settings.get("bucket")
        if not bucket or not isinstance(bucket, str):
            raise ConfigError(f"{setting}.bucket: an s3 store needs a bucket name")
        retry_mode = str(settings.get("retry_mode", "standard"))
        if retry_mode not in RETRY_MODES:
            raise ConfigError(f"{setting}.retry_mode: unknown {retry_mode!r}; use one of {', '.join(RETRY_MODES)}")
        self.bucket = bucket
        self.prefix = str(settings.get("prefix", "agent-health")).strip("/")
        self.endpoint_url = settings.get("endpoint_url") or None
        self.region = settings.get("region") or None
        self.profile = settings.get("profile") or None
        self.max_attempts = _int(settings, "max_attempts", 5, setting)
        self.retry_mode = retry_mode
        self.pool = _int(settings, "max_pool_connections", 32, setting)
        self.read_concurrency = _int(settings, "read_concurrency", 16, setting)
        self.timeout_s = float(settings.get("timeout_s", 30))
        self.setting = setting
        self._client = client

    @property
    def client(self) -> Any:
        """The boto3 S3 client, made on first use (boto3 clients are thread-safe)."""
        if self._client is None:
            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            register_credentials(session.get_credentials())  # the secret key is scrubbed like any credential
            self._client = session.client(
                "s3",
                endpoint_url=self.endpoint_url,
                config=BotoConfig(
                    retries={"max_attempts": self.max_attempts, "mode": self.retry_mode},
                    max_pool_connections=self.pool,
                    connect_timeout=self.timeout_s,
                    read_timeout=self.timeout_s,
                ),
            )
        return self._client

    @property
    def location(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"{where} ({self.endpoint_url})" if self.endpoint_url else where

    def key(self, *parts: str) -> str:
        """The object key of `parts` under the prefix."""
        return "/".join([self.prefix, *parts] if self.prefix else parts)

    def _fail(self, what: str, exc: Exception) -> StoreError:
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            detail = f"{err.get('Code', 'error')}: {err.get('Message', '')}".strip(": ")
        else:
            detail = f"{type(exc).__name__}: {exc}"
        return StoreError(f"{self.location}: {what}: {detail}")

    @staticmethod
    def _code(exc: Exception) -> str:
        response = getattr(exc, "response", None) or {}
        return str(response.get("Error", {}).get("Code", ""))

    # -- single objects ------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        found = self.fetch(key)
        return found[0] if found is not None else None

    def fetch(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, or None when there is none."""
        found = self.read(key)
        return (found.data, found.etag) if found.data is not None else None

    def read(self, key: str) -> ObjectRead:
        """One GET, with the object's ETag and LastModified and the server's clock."""
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=key)
            data = bytes(resp["Body"].read())
        except Exception as exc:
            if self._code(exc) in _MISSING:
                return ObjectRead(key, None, server_time=server_time(getattr(exc, "response", None)))
            raise self._fail(f"cannot read {key}", exc) from exc
        modified = resp.get("LastModified")
        return ObjectRead(
            key,
            data,
            str(resp.get("ETag", "")),
            modified.timestamp() if modified is not None else 0.0,
            server_time(resp),
        )

    def put(self, key: str, data: bytes, *, if_absent: bool = False, content_type: str = "application/json") -> bool:
        """Write one object whole. With `if_absent`, a conditional write (If-None-Match: *): False
        when the object already exists (another writer won; nothing is overwritten)."""
        return self.write(key, data, if_absent=if_absent, content_type=content_type) is not None

    def write(
        self, key: str, data: bytes, *, if_absent: bool = False, content_type: str = "application/json"
    ) -> ObjectWritten | None:
        """`put`, returning the new object's ETag and the server's clock (None: `if_absent` and
        the object exists)."""
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data, "ContentType": content_type}
        if if_absent:
            kw["IfNoneMatch"] = "*"
        try:
            resp = self.client.put_object(**kw)
        except Exception as exc:
            # 412: the object exists; 409: a concurrent conditional write to the same key is in flight.
            if if_absent and self._code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return None
            raise self._fail(f"cannot write {key}", exc) from exc
        return ObjectWritten(str(resp.get("ETag", "")), server_time(resp))

    def exists(self, key: str) -> bool:
        """True when the object is there (one HEAD)."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if self._code(exc) in _MISSING:
                return False
            raise self._fail(f"cannot read {key}", exc) from exc
        return True

    def delete(self, key: str) -> bool:
        """Remove one object; True when it existed."""
        if not self.exists(key):
            return False
        self.remove(key)
        return True

    def remove(self, key: str) -> None:
        """Remove one object, there or not (one DELETE)."""
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise self._fail(f"cannot delete {key}", exc) from exc

    # -- many objects --------------------------------------------------------------------------
    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        try:
            yield from self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        except Exception as exc:
            if self._code(exc) == "NoSuchBucket":
                raise StoreError(f"{self.location}: bucket {self.bucket!r} does not exist") from exc
            raise self._fail(f"cannot list {prefix}", exc) from exc

    def list(self, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, ETag) of every object under `prefix`, in key order, page by page."""
        for page in self._pages(prefix):
            for item in page.get("Contents", ()):
                yield item["Key"], str(item.get("ETag", ""))

    def listing(self, prefix: str) -> Listing:
        """Every object under `prefix` with its ETag and LastModified, and the server's clock."""
        objects: builtins.list[ListedObject] = []
        first = last = 0.0
        for page in self._pages(prefix):
            last = server_time(page)
            first = first or last
            for item in page.get("Contents", ()):
                modified = item.get("LastModified")
                objects.append(
                    ListedObject(item["Key"], str(item.get("ETag", "")), modified.timestamp() if modified else 0.0)
                )
        return Listing(objects, first, last)

    def has_any(self, prefix: str) -> bool:
        """True when at least one object lives under `prefix` (one small listing)."""
        try:
            resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:
            if self._code(exc) == "NoSuchBucket":
                raise StoreError(f"{self.location}: bucket {self.bucket!r} does not exist") from exc
            raise self._fail(f"cannot list {prefix}", exc) from exc
        return bool(resp.get("Contents"))

    def remove_many(self, keys: Iterable[str]) -> None:
        """Remove objects, there or not, 1,000 per DeleteObjects request."""
        keys = list(keys)
        for i in range(0, len(keys), _DELETE_BATCH):
            batch = keys[i : i + _DELETE_BATCH]
            try:
                resp = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            except Exception as exc:
                raise self._fail(f"cannot delete {batch[0]} and {len(batch) - 1} more", exc) from exc
            errors = [e for e in resp.get("Errors", ()) if e.get("Code") not in _MISSING]
            if errors:
                e = errors[0]
                detail = f"{e.get('Code')}: {e.get('Message', '')}"
                raise StoreError(f"{self.location}: cannot delete {e.get('Key')}: {detail}")

    def parallel(self, fn: Callable[[T], R], items: Iterable[T]) -> builtins.list[R | Exception]:
        """`fn` of each item, `read_concurrency` at a time, in order; an item whose call raised
        gives its exception (the others still run)."""
        items = list(items)

        def call(item: T) -> R | Exception:
            try:
                return fn(item)
            except Exception as exc:  # handed back per item: the caller decides  # noqa: BLE001
                return exc

        if len(items) <= 1:
            return [call(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(self.read_concurrency, len(items))) as pool:
            return list(pool.map(call, items))

    def read_many(self, keys: Iterable[str]) -> builtins.list[ObjectRead]:
        """`read` of each key, `read_concurrency` at a time, in order (the first failure raises)."""
        out: builtins.list[ObjectRead] = []
        for found in self.parallel(self.read, keys):
            if isinstance(found, Exception):
                raise found
            out.append(found)
        return out

    def get_many(self, keys: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """(key, bytes or None) for each key, in order, fetched `read_concurrency` at a time."""
        for key, found in self.fetch_many(keys):
            yield key, (found[0] if found is not None else None)

    def fetch_many(self, keys: Iterable[str]) -> Iterator[tuple[str, tuple[bytes, str] | None]]:
        """(key, (bytes, ETag) or None) for each key, in order, `read_concurrency` at a time."""
        keys = list(keys)
        if len(keys) <= 1:
            for key in keys:
                yield key, self.fetch(key)
            return
        with ThreadPoolExecutor(max_workers=min(self.read_concurrency, len(keys))) as pool:
            yield from zip(keys, pool.map(self.fetch, keys))

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Write many objects, `read_concurrency` at a time (each one whole)."""
        items = list(items)
        with ThreadPoolExecutor(max_workers=max(1, min(self.read_concurrency, len(items)))) as pool:
            for _ in pool.map(lambda kv: self.put(*kv), items):
                pass
