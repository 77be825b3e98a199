"""One fresh, empty store per test, of each type: local files, S3 on the session's moto server
(a new bucket), OpenSearch on the session's node (a new index). `store_settings` gives the
`StoreSettings` a worker process would be configured with to reach the same store."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_health.config import Config
from agent_health.model import StoreSettings
from agent_health.stores import ResultStore, open_store
from tests.support.s3 import all_objects, new_bucket

STORE_TYPES = ["local", "s3", "opensearch"]


def new_store_settings(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreSettings:
    """Settings of a fresh, empty store of `kind` (starting its session service on first use)."""
    if kind == "local":
        return StoreSettings(type="local", settings={"path": str(tmp_path / "results")})
    if kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        return StoreSettings(
            type="s3", settings={"bucket": new_bucket(endpoint), "prefix": "team/evals", "endpoint_url": endpoint}
        )
    url = request.getfixturevalue("opensearch_url")
    return StoreSettings(type="opensearch", settings={"url": url, "index": f"ah-results-{uuid.uuid4().hex[:10]}"})


@pytest.fixture(params=STORE_TYPES)
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSettings:
    return new_store_settings(request.param, request, tmp_path)


@pytest.fixture(params=["s3", "opensearch"])
def shared_settings(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSettings:
    """A fresh shared store (S3 or OpenSearch): results, judge cache and recordings."""
    return new_store_settings(request.param, request, tmp_path)


@pytest.fixture
def project_config(tmp_path: Path) -> Config:
    return Config(root=str(tmp_path))


@pytest.fixture
def store(store_settings: StoreSettings, project_config: Config) -> ResultStore:
    return open_store(project_config, store_settings)


@pytest.fixture
def stored_bytes(store_settings: StoreSettings) -> Callable[[], bytes]:
    """Everything the store wrote, as one blob (to check what never reaches it)."""

    def read() -> bytes:
        s: dict[str, Any] = store_settings.settings
        if store_settings.type == "local":
            return b"".join(p.read_bytes() for p in sorted(Path(s["path"]).rglob("*")) if p.is_file())
        if store_settings.type == "s3":
            return b"".join(all_objects(s["endpoint_url"], s["bucket"]).values())
        out = b""
        for index in (s["index"], f"{s['index']}-full", f"{s['index']}-runs"):
            httpx.post(f"{s['url']}/{index}/_refresh", timeout=30)
            resp = httpx.post(f"{s['url']}/{index}/_search", json={"size": 10000}, timeout=30)
            out += resp.content
        return out

    return read


@pytest.fixture
def s3_settings(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSettings:
    """Settings of a fresh S3 store alone (for tests of the S3 read path and its summary log)."""
    return new_store_settings("s3", request, tmp_path)
