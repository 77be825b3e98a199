"""One S3 bucket and prefix through boto3: whole-object puts (optionally conditional), gets,
paginated listings and parallel reads. Works with any S3-compatible server (`endpoint_url`).

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

from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agent_health.backends.shared import check_no_inline_secrets
from agent_health.errors import ConfigError, StoreError

RETRY_MODES = ("standard", "adaptive", "legacy")


def _int(settings: Mapping[str, Any], name: str, default: int, setting: str) -> int:
    try:
        value = int(settings.get(name, default))
    except (TypeError, ValueError):
        raise ConfigError(f"{setting}.{name}: expected a whole number, got {settings.get(name)!r}") from None
    if value < 1:
        raise ConfigError(f"{setting}.{name}: must be at least 1, got {value}")
    return value


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
            import boto3
            from botocore.config import Config as BotoConfig

            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
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
        from botocore.exceptions import ClientError

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
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=key)
            return bytes(resp["Body"].read()), str(resp.get("ETag", ""))
        except Exception as exc:
            if self._code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail(f"cannot read {key}", exc) from exc

    def put(self, key: str, data: bytes, *, if_absent: bool = False, content_type: str = "application/json") -> bool:
        """Write one object whole. With `if_absent`, a conditional write (If-None-Match: *): False
        when the object already exists (another writer won; nothing is overwritten)."""
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data, "ContentType": content_type}
        if if_absent:
            kw["IfNoneMatch"] = "*"
        try:
            self.client.put_object(**kw)
            return True
        except Exception as exc:
            # 412: the object exists; 409: a concurrent conditional write to the same key is in flight.
            if if_absent and self._code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return False
            raise self._fail(f"cannot write {key}", exc) from exc

    def delete(self, key: str) -> bool:
        """Remove one object; True when it existed."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if self._code(exc) in ("NoSuchKey", "404", "NotFound"):
                return False
            raise self._fail(f"cannot read {key}", exc) from exc
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise self._fail(f"cannot delete {key}", exc) from exc
        return True

    # -- many objects --------------------------------------------------------------------------
    def list(self, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, ETag) of every object under `prefix`, in key order, page by page."""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                for item in page.get("Contents", ()):
                    yield item["Key"], str(item.get("ETag", ""))
        except Exception as exc:
            if self._code(exc) == "NoSuchBucket":
                raise StoreError(f"{self.location}: bucket {self.bucket!r} does not exist") from exc
            raise self._fail(f"cannot list {prefix}", exc) from exc

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
