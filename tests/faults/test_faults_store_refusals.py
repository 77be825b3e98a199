"""A shared store that refuses: a missing S3 bucket was reported before the first test, then every
test ran (and spent) and nothing was stored; an OpenSearch refresh that failed (credentials
refused, no permission to refresh) was swallowed, so a search after it silently missed what was
just written. Now a store that cannot take the run's manifest stops the run before any test
(exit 2) unless `--no-store`, and a refresh that fails is a StoreError naming the index.

The OpenSearch node is the suite's real node. Its security plugin is not installed, so the
credential checks a secured cluster makes are made by a small proxy on 127.0.0.1 in front of it,
answering 401 and 403 with the bodies the security plugin sends; every other request reaches the
node as it was sent."""

from __future__ import annotations

import base64
import json
import textwrap
import uuid
from typing import Any

import httpx
import pytest

from agent_health.backends.opensearch import OpenSearchIndex
from agent_health.errors import StoreError
from tests.support.cli import cli_in_process
from tests.support.http import LocalHTTPServer, QuietHandler

PASSWORD = "proxy-pa55word-7c1e"

COUNTING_AGENT = """
def run(prompt):
    with open("calls.txt", "a") as fh:  # every call the agent gets, and so every one paid for
        fh.write("call\\n")
    return "The payment service cannot reach its database."
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "counted", "connector": "python", "settings": {"function": "counting_agent:run"},
             "versions": {"v1": {}}}],
    default_agent="counted@v1",
)
"""


def test_a_missing_bucket_stops_the_run_before_any_test(tmp_path, evals, s3_endpoint):
    """The bucket does not exist: every test ran (and its agent was paid) and nothing was stored."""
    (tmp_path / "counting_agent.py").write_text(textwrap.dedent(COUNTING_AGENT))
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    cases = "".join(f"  - name: outage {i}\n    prompt: Diagnose outage {i}.\n" for i in range(5))
    evals("outages.yaml", "tests:\n" + cases)
    missing = f"ah-missing-{uuid.uuid4().hex[:8]}"
    store = json.dumps({"type": "s3", "settings": {"bucket": missing, "endpoint_url": s3_endpoint}})
    proc = cli_in_process(
        "run", "evals", "--no-judge", "--store", store, "--reporter", "json=report.json", cwd=tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert not (tmp_path / "calls.txt").exists(), "the agent was called though nothing could be stored"
    assert f"s3://{missing}" in out and "NoSuchBucket" in out and "(the run manifest); no test was run: fix" in out, out
    assert "--no-store" in out and "Traceback" not in out
    assert not (tmp_path / "report.json").exists()  # no report of a run that did not run
    # what the message offers: the same run without a store runs every test
    unstored = cli_in_process("run", "evals", "--no-judge", "--no-store", cwd=tmp_path)
    assert unstored.returncode == 0, unstored.stdout + unstored.stderr
    assert (tmp_path / "calls.txt").read_text().count("call") == 5


def security_exception(reason: str, status: int) -> dict[str, Any]:
    """The body OpenSearch's security plugin answers a refused request with."""
    cause = {"type": "security_exception", "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


class Cluster(LocalHTTPServer):
    """The proxy: `password` is the users' password now; `without_refresh` answers a refresh as a
    service without that API does; `refreshes` counts the refreshes asked for."""

    def __init__(self, upstream: str):
        super().__init__(SecuredProxy)
        self.upstream, self.password, self.without_refresh, self.refreshes = upstream, PASSWORD, False, 0


class SecuredProxy(QuietHandler):
    """Forwards to the node what its user may do: `admin` everything, `writer` everything but a
    refresh; a wrong password nothing."""

    server: Cluster

    def _relay(self) -> None:
        cluster = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        user, _, password = base64.b64decode(self.headers.get("Authorization", "Basic ")[6:]).decode().partition(":")
        if password != cluster.password or user not in ("admin", "writer"):
            self._answer(401, security_exception("Authentication finally failed", 401))
            return
        path = self.path.split("?")[0]
        if path.endswith("/_refresh"):
            cluster.refreshes += 1
            if cluster.without_refresh:
                message = f"no handler found for uri [{path}] and method [{self.command}]"
                self._answer(400, {"error": message, "status": 400})
                return
            if user == "writer":
                reason = f"no permissions for [indices:admin/refresh] and User [name={user}, backend_roles=[]]"
                self._answer(403, security_exception(reason, 403))
                return
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
        resp = httpx.request(self.command, cluster.upstream + self.path, content=body, headers=headers, timeout=30)
        self._answer(resp.status_code, resp.content, resp.headers.get("content-type", "application/json"))

    def _answer(self, status: int, body: Any, media_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay


@pytest.fixture
def cluster(opensearch_url):
    with Cluster(opensearch_url) as server:
        yield server


def index(cluster: Cluster, user: str, monkeypatch: pytest.MonkeyPatch) -> OpenSearchIndex:
    monkeypatch.setenv("FAULTS_OS_PASSWORD", PASSWORD)
    auth = {"type": "basic", "username": user, "password_env": "FAULTS_OS_PASSWORD"}
    name = f"faults-{uuid.uuid4().hex[:8]}"
    mapping = {"properties": {"key": {"type": "keyword"}}}
    return OpenSearchIndex({"url": cluster.url, "auth": auth}, name, mapping, "store.settings")


def test_a_refresh_refused_for_lack_of_permission_is_an_error_not_an_empty_search(cluster, monkeypatch):
    """The writer may write and search but not refresh: a listing right after its writes found
    nothing, and said nothing."""
    idx = index(cluster, "writer", monkeypatch)
    idx.put_many([(f"doc-{i}", {"key": f"doc-{i}"}) for i in range(3)])
    with pytest.raises(StoreError) as caught:
        idx.refresh()
    message = str(caught.value)
    assert f"index {idx.index}: cannot refresh the index" in message, message
    assert "no permissions for [indices:admin/refresh]" in message, message
    assert PASSWORD not in message


def test_credentials_refused_at_a_refresh_are_an_error(cluster, monkeypatch):
    """The index was ready (made with good credentials), then the cluster's password was rotated:
    the refresh's 401 was swallowed."""
    idx = index(cluster, "admin", monkeypatch)
    idx.ensure()
    cluster.password = "rotated-" + uuid.uuid4().hex
    with pytest.raises(StoreError) as caught:
        idx.refresh()
    assert "Authentication finally failed" in str(caught.value), str(caught.value)


def test_writes_are_refreshed_on_the_real_node_and_a_service_without_refresh_is_not_asked_again(cluster, monkeypatch):
    idx = index(cluster, "admin", monkeypatch)
    idx.put_many([(f"doc-{i}", {"key": f"doc-{i}"}) for i in range(3)])
    idx.refresh()
    assert idx.count({"match_all": {}}) == 3 and cluster.refreshes == 1
    cluster.without_refresh = True
    idx.refresh()
    idx.refresh()
    assert cluster.refreshes == 2  # asked once, then known to be missing
