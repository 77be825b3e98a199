"""Auth and TLS of the OpenSearch source: a recording forwarder on 127.0.0.1 (plain or TLS) in
front of the real test node shows exactly what the client sends."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_health.errors import ConfigError
from agent_health.traces.opensearch import OpenSearchTraceSource
from agent_health.traces.source import RunRef
from agent_health.traces.view import TracesUnavailable, TracesView
from tests.support import LocalHTTPServer, QuietHandler, skip_or_fail


class Forwarder:
    """Forwards every request to `upstream` and records its headers."""

    def __init__(self, upstream: str, context: ssl.SSLContext | None = None):
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"  # one request per connection, as before

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.seen.append({k.lower(): v for k, v in self.headers.items()})
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
                r = httpx.request(self.command, upstream + self.path, content=body, headers=headers, timeout=30)
                self.send_response(r.status_code)
                self.send_header("content-type", r.headers.get("content-type", "application/json"))
                self.send_header("content-length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        self.server = LocalHTTPServer(Handler, tls=context).start()

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def indexed(opensearch_url: str) -> dict[str, str]:
    """One span document to find."""
    doc = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "chat m",
        "serviceName": "auth-agent",
        "startTime": "2026-01-01T00:00:00.000000Z",
        "endTime": "2026-01-01T00:00:01.000000Z",
        "span.attributes.gen_ai@usage@input_tokens": 7,
        "span.attributes.gen_ai@operation@name": "chat",
    }
    httpx.put(
        f"{opensearch_url}/otel-v1-apm-span-auth/_doc/1", params={"refresh": "true"}, json=doc, timeout=30
    ).raise_for_status()
    return {"url": opensearch_url, "trace_id": doc["traceId"]}


@pytest.fixture
def forwarder(indexed: dict[str, str]) -> Iterator[Forwarder]:
    fwd = Forwarder(indexed["url"])
    yield fwd
    fwd.close()


def _tokens(settings: dict[str, Any], trace_id: str) -> int:
    src = OpenSearchTraceSource({"index": "otel-v1-apm-span-auth", **settings})
    try:
        return TracesView(src, RunRef(run_id="r1", trace_id=trace_id), wait_s=0).input_tokens
    finally:
        src.close()


def test_basic_auth_sends_credentials_from_the_environment(forwarder, indexed, monkeypatch):
    monkeypatch.setenv("OS_PW", "pa55word")
    assert (
        _tokens(
            {"url": forwarder.url, "auth": {"type": "basic", "username": "reader", "password_env": "OS_PW"}},
            indexed["trace_id"],
        )
        == 7
    )
    expected = "Basic " + base64.b64encode(b"reader:pa55word").decode()
    assert forwarder.seen and all(h.get("authorization") == expected for h in forwarder.seen)


def test_sigv4_signs_every_request(forwarder, indexed, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    assert (
        _tokens(
            {"url": forwarder.url, "auth": {"type": "sigv4", "region": "eu-west-1", "service": "es"}},
            indexed["trace_id"],
        )
        == 7
    )
    for h in forwarder.seen:
        assert h["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/es/aws4_request" in h["authorization"] and "x-amz-date" in h
        assert "wJalrXUtnFEMI" not in h["authorization"]  # the secret signs, it is never sent


def test_bad_auth_settings_name_the_setting(monkeypatch):
    monkeypatch.delenv("AGENT_HEALTH_OPENSEARCH_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="traces.settings.auth: basic auth needs a username and a password"):
        OpenSearchTraceSource({"auth": {"type": "basic", "username": "u", "password_env": "NOPE_UNSET"}}).client
    with pytest.raises(ConfigError, match="traces.settings.auth.type: unknown 'kerberos'"):
        OpenSearchTraceSource({"auth": {"type": "kerberos"}}).client


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if not openssl:
        skip_or_fail("openssl is not installed (needed to make a test certificate)")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_verifies_against_the_given_ca(indexed, tls_cert):
    cert, key = tls_cert
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    fwd = Forwarder(indexed["url"], context)
    try:
        assert _tokens({"url": fwd.url, "ca_certs": str(cert), "verify_certs": True}, indexed["trace_id"]) == 7
        with pytest.raises(TracesUnavailable, match=r"traces unavailable for run r1 .*SSL|certificate"):
            _tokens({"url": fwd.url, "verify_certs": True, "timeout_s": 2}, indexed["trace_id"])
        assert _tokens({"url": fwd.url, "verify_certs": False, "ssl_show_warn": False}, indexed["trace_id"]) == 7
    finally:
        fwd.close()
