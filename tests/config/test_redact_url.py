"""`agent_health.config.secrets.redact_url`: the one place a URL's userinfo is taken out of
locations and messages (the OpenSearch store and trace source, the OpenAI judge use it)."""

from __future__ import annotations

import socket

import pytest

from agent_health.backends.opensearch import OpenSearchIndex
from agent_health.config.secrets import redact_url
from agent_health.errors import StoreError
from agent_health.judges.openai import OpenAIChat
from agent_health.traces.opensearch import OpenSearchTraceSource

PASSWORD = "pa55-w0rd-redact-77"


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"http://admin:{PASSWORD}@127.0.0.1:9200", "http://127.0.0.1:9200"),
        (f"https://admin:{PASSWORD}@search.example.com/path?q=1", "https://search.example.com/path?q=1"),
        ("http://user@host:1/v1", "http://host:1/v1"),
        (f"https://u:{PASSWORD[:4]}@{PASSWORD[5:]}@host/x", "https://host/x"),  # a raw '@' in the password
        ("http://127.0.0.1:9200/idx", "http://127.0.0.1:9200/idx"),  # nothing to take out
        ("no url here: a@b", "no url here: a@b"),
        (
            f"ConnectionError(http://a:{PASSWORD}@h1:1/x) then (https://b:{PASSWORD}@h2:2)",
            "ConnectionError(http://h1:1/x) then (https://h2:2)",  # every URL of a message
        ),
    ],
)
def test_redact_url_removes_every_urls_userinfo_and_nothing_else(text, expected):
    assert redact_url(text) == expected
    assert PASSWORD not in redact_url(text)


def test_the_private_copies_are_gone_and_every_user_shares_the_public_one():
    import agent_health.backends.opensearch as backend
    import agent_health.judges.openai as openai
    import agent_health.traces.opensearch as traces

    for module in (backend, openai, traces):
        assert not hasattr(module, "_redact_url"), module.__name__
    assert openai.redact_url is traces.redact_url is backend.redact_url is redact_url


def test_an_unreachable_store_and_judge_name_their_url_without_the_password():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://admin:{PASSWORD}@127.0.0.1:{port}"
    source = OpenSearchTraceSource({"url": url, "timeout_s": 1})  # a trace source may hold it in its URL
    assert source.describe() == f"OpenSearch http://127.0.0.1:{port} index otel-v1-apm-span-*"
    # a store refuses a password in its URL; its user is still left out of messages
    index = OpenSearchIndex({"url": f"http://admin@127.0.0.1:{port}", "timeout_s": 1}, "ah-redact", {})
    assert index.location == f"OpenSearch http://127.0.0.1:{port} index ah-redact"
    with pytest.raises(StoreError) as info:
        index.get("some-id")
    assert f"127.0.0.1:{port}" in str(info.value) and "admin@" not in str(info.value)
    judge = OpenAIChat("m", {"base_url": url + "/v1"})
    assert judge.label == f"openai:m at http://127.0.0.1:{port}/v1"
    assert judge.identity == f"http://127.0.0.1:{port}/v1"  # judge cache keys never hold the password
