"""pytest plugin: a real S3-compatible server (moto's server mode) on 127.0.0.1 and a free port,
started once per session, with dummy credentials in the environment (the AWS chain every boto3
client and worker subprocess reads)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port, wait_for_port
from tests.support.processes import stop
from tests.support.services import skip_or_fail

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAAGENTHEALTHTEST",
    "AWS_SECRET_ACCESS_KEY": "agent-health-test-secret-key-4f9c2a",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint URL of a running moto S3 server; AWS_* test credentials set for the session."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # moto[server] is a dev dependency
        skip_or_fail(f"moto[server] is not installed: {exc}")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request at INFO
    saved = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def new_bucket(endpoint: str) -> str:
    """Create a bucket with a fresh name on the server and return the name."""
    import boto3

    name = f"ah-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name


def all_objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    """Every object of a bucket (for tests that inspect what was stored)."""
    import boto3

    client: Any = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", ()):
            out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


@contextlib.contextmanager
def moto_server_process() -> Iterator[str]:
    """moto's S3 server as its own process (as a real S3 would be: not sharing the caller's
    interpreter), for benchmarks; yields its endpoint URL."""
    exe = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if exe is None:
        raise RuntimeError("moto_server not found: pip install 'moto[server]' (a dev dependency)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        if not wait_for_port(port, timeout=30):
            raise RuntimeError("moto_server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc, timeout=30)
