"""Proxies and HTTP/2 under the http connector, with real services on 127.0.0.1: a forward proxy
(proxy.py, with basic auth) and a TLS agent on hypercorn that speaks HTTP/2 (certificates from a
private CA made by trustme, trusted through SSL_CERT_FILE as a user would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.connectors.servers import AgentServer, invoke, invoke_error, runtime
from tests.support import free_port, skip_or_fail, wait_for_port

PROXY_USER, PROXY_PASSWORD = "agent-health", "proxy-pass-7f3a"
ROOT = Path(__file__).resolve().parents[2]


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a server started in its own session, with every process it forked."""
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; make sure no child of its group outlived it
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


class Proxy:
    def __init__(self, tmp: Path):
        self.port = free_port()
        self.log = tmp / "proxy.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "proxy",
                "--hostname",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--num-workers",
                "1",
                "--num-acceptors",
                "1",
                "--basic-auth",
                f"{PROXY_USER}:{PROXY_PASSWORD}",
                "--log-file",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # proxy.py forks acceptor processes: stop them with their group
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth_url = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{self.port}"

    def access(self, what: str, timeout: float = 5.0) -> list[str]:
        """Access-log lines naming `what` (the proxy writes them just after the exchange)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [ln for ln in self.log.read_text().splitlines() if "access_log" in ln and what in ln]
            if lines or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def close(self) -> None:
        stop_group(self.proc)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[Proxy]:
    p = Proxy(tmp_path_factory.mktemp("proxy"))
    try:
        if not wait_for_port(p.port, timeout=20):
            skip_or_fail("proxy.py did not start on 127.0.0.1")
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module")
def tls_agent(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(https base URL, CA bundle path) of an HTTP/2-capable agent."""
    import trustme

    tmp = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    cert.private_key_pem.write_to_path(str(tmp / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp / "cert.pem"))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hypercorn",
            "tests.connectors.h2_agent:app",
            "--bind",
            f"127.0.0.1:{port}",
            "--certfile",
            str(tmp / "cert.pem"),
            "--keyfile",
            str(tmp / "key.pem"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if not wait_for_port(port, timeout=20):
            skip_or_fail("hypercorn did not start on 127.0.0.1")
        yield f"https://127.0.0.1:{port}", tmp / "ca.pem"
    finally:
        stop_group(proc)


@pytest.mark.parametrize("pool", ["aiohttp", "httpx"])
def test_requests_go_through_the_configured_proxy_with_its_credentials(
    server: AgentServer, proxy: Proxy, pool, monkeypatch
):
    monkeypatch.setenv("PROXY_PASSWORD", PROXY_PASSWORD)  # as the README shows: the password by reference
    before = len(proxy.access(""))
    setting = f"http://{PROXY_USER}:${{PROXY_PASSWORD}}@127.0.0.1:{proxy.port}"
    r = invoke(runtime("http", endpoint=server.url + f"/chat?via={pool}", pool=pool, proxy=setting), "q")
    assert r.output == "answer to: q"
    assert PROXY_PASSWORD not in r.model_dump_json()
    lines = proxy.access(f"POST 127.0.0.1:{server.port}/chat?via={pool} - 200")
    assert len(lines) == 1 and len(proxy.access("")) == before + 1


@pytest.mark.parametrize("pool", ["aiohttp", "httpx"])
def test_the_proxy_from_the_environment_is_used(server: AgentServer, proxy: Proxy, pool, monkeypatch):
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.auth_url)
    r = invoke(runtime("http", endpoint=server.url + f"/chat?env={pool}", pool=pool), "q")
    assert r.output == "answer to: q"
    assert proxy.access(f"POST 127.0.0.1:{server.port}/chat?env={pool} - 200")


@pytest.mark.parametrize("pool", ["aiohttp", "httpx"])
def test_a_proxy_refusing_the_credentials_is_errored_without_leaking_them(server: AgentServer, proxy: Proxy, pool):
    wrong = f"http://{PROXY_USER}:wrong-{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"
    message = invoke_error(runtime("http", endpoint=server.url + "/chat", pool=pool, proxy=wrong))
    assert "HTTP 407" in message and server.url + "/chat" in message
    assert PROXY_PASSWORD not in message


def test_https_through_the_proxy_tunnels_with_connect(tls_agent, proxy: Proxy, monkeypatch):
    url, ca = tls_agent
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    r = invoke(runtime("http", endpoint=url + "/agent", proxy=proxy.auth_url), "tunnelled")
    assert r.output == "tunnelled over HTTP/1.1"
    assert proxy.access(f"CONNECT 127.0.0.1:{url.rsplit(':', 1)[1]}")


def test_http2_with_the_httpx_pool(tls_agent, monkeypatch):
    url, ca = tls_agent
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the agent's certificate verifies against the private CA
    assert invoke(runtime("http", endpoint=url + "/agent", http2=True), "hello").output == "hello over HTTP/2"
    # the default pool speaks HTTP/1.1 to the same agent (ALPN offers both)
    assert invoke(runtime("http", endpoint=url + "/agent"), "hello").output == "hello over HTTP/1.1"


def test_an_untrusted_certificate_is_errored_naming_the_cause(tls_agent, monkeypatch):
    url, _ = tls_agent
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    message = invoke_error(runtime("http", endpoint=url + "/agent", retry={"max_retries": 0}))
    assert "certificate" in message.lower() and url in message
