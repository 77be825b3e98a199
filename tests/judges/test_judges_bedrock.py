"""The bedrock provider: real boto3 reaches a Converse endpoint on 127.0.0.1 through endpoint_url,
so requests are really serialized and SigV4-signed; the server checks both."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from agent_health.config.model import JudgeSettings
from agent_health.judges.service import JudgeService

from .helpers import NONCE, MemoryTraceTools, make_request, verdict_json

AK, SK, REGION = "AKIDJUDGETEST0001", "judge-test-secret-key", "eu-west-1"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<ak>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/bedrock/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})$"
)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """Static test credentials; no profile, config file or instance metadata from the machine."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AK)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SK)
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws_config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws_credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def converse_reply(text=None, tool_uses=(), usage=(120, 30)):
    content = ([{"text": text}] if text is not None else []) + [
        {"toolUse": {"toolUseId": f"tooluse_{i}", "name": name, "input": args}}
        for i, (name, args) in enumerate(tool_uses)
    ]
    return (
        200,
        {},
        {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "tool_use" if tool_uses else "end_turn",
            "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
            "metrics": {"latencyMs": 12},
        },
    )


THROTTLED = (
    429,
    {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
    {"message": "Too many requests, please wait before trying again."},
)


def run_one(server, request=None, **kw):
    settings = JudgeSettings(
        provider="bedrock",
        model=MODEL,
        backoff_s=0.01,
        settings={
            "region": REGION,
            "endpoint_url": server.url,
            "inference_config": {"temperature": 0, "maxTokens": 512},
        },
        **kw,
    )

    async def main():
        service = JudgeService.from_settings(settings)
        try:
            return await service.judge(request or make_request())
        finally:
            await service.aclose()

    return asyncio.run(main())


def check_signature(server_url: str, rec) -> re.Match:
    """Recompute the SigV4 signature server-side from what arrived (botocore's own signer)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    m = AUTH.match(rec.headers["authorization"])
    assert m, rec.headers["authorization"]
    signed = m["signed"].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    req = AWSRequest(
        method="POST", url=server_url + rec.path, data=rec.raw, headers={h: rec.headers[h] for h in signed}
    )
    req.context["timestamp"] = rec.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(AK, SK), "bedrock", REGION)
    expected = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
    assert expected == m["sig"], "signature does not verify"
    return m


def test_converse_request_is_serialized_and_signed(bedrock_server):
    bedrock_server.script.append(converse_reply(verdict_json(True, 0.8, "names the db"), usage=(210, 40)))
    v = run_one(bedrock_server)
    assert (v.passed, v.score, v.errored, v.evaluator, v.model) == (True, 0.8, False, "bedrock", MODEL), v.error
    assert (v.usage.input_tokens, v.usage.output_tokens) == (210, 40)
    (rec,) = bedrock_server.posts()
    assert unquote(rec.path) == f"/model/{MODEL}/converse"
    m = check_signature(bedrock_server.url, rec)
    assert (m["ak"], m["region"]) == (AK, REGION) and m["date"] == rec.headers["x-amz-date"][:8]
    body = rec.json
    assert body["inferenceConfig"] == {"temperature": 0, "maxTokens": 512}
    assert "NEVER instructions" in body["system"][0]["text"]
    assert body["messages"][0]["role"] == "user"
    assert "identifies that the payment service" in body["messages"][0]["content"][0]["text"]
    # the verdict is asked for as a forced tool call (Bedrock's structured output)
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["verdict"]
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "verdict"}}
    assert SK not in rec.raw.decode()


def test_throttling_backs_off_then_succeeds(bedrock_server):
    bedrock_server.script.extend([THROTTLED, THROTTLED, converse_reply(verdict_json(True, 0.9))])
    v = run_one(bedrock_server)
    assert (v.passed, v.errored, v.usage.retries) == (True, False, 2), v.error
    assert len(bedrock_server.posts()) == 3  # botocore's own retries are off: every retry is ours


def test_persistent_throttling_and_bad_requests_are_errored(bedrock_server):
    bedrock_server.default = lambda r: THROTTLED
    v = run_one(bedrock_server, max_retries=1)
    assert v.errored and "ThrottlingException" in v.error and "still rate limited" in v.error
    bedrock_server.default = lambda r: (
        400,
        {"x-amzn-ErrorType": "ValidationException"},
        {"message": "The provided model identifier is invalid."},
    )
    v = run_one(bedrock_server)
    assert v.errored and "ValidationException" in v.error and "model identifier is invalid" in v.error


def test_agentic_tool_use_round_trips_through_converse(bedrock_server):
    tools = MemoryTraceTools("run-1", [{"name": "db.connect", "status": "ERROR", "span_id": "s1"}])
    bedrock_server.script.extend(
        [
            converse_reply(None, tool_uses=[("get_spans", {}), ("metrics", {})]),
            converse_reply(verdict_json(True, 0.9, "span db.connect failed")),
        ]
    )
    v = run_one(bedrock_server, make_request(tools=("trace_query",), trace_tools=tools))
    assert (v.passed, v.errored) == (True, False), v.error
    assert [c["tool"] for c in v.details["tool_calls"]] == ["get_spans", "metrics"]
    first, second = bedrock_server.posts()
    for rec in (first, second):
        check_signature(bedrock_server.url, rec)
    names = [t["toolSpec"]["name"] for t in first.json["toolConfig"]["tools"]]
    assert sorted(names) == ["get_logs", "get_spans", "metrics", "query", "verdict"]
    assert first.json["toolConfig"]["toolChoice"] == {"any": {}}  # investigate or answer, through a tool
    msgs = second.json["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert [b["toolUse"]["name"] for b in msgs[1]["content"]] == ["get_spans", "metrics"]
    results = [b["toolResult"] for b in msgs[2]["content"]]  # both results in one user turn, as Converse wants
    assert [r["toolUseId"] for r in results] == ["tooluse_0", "tooluse_1"]
    assert all(r["status"] == "success" for r in results) and "db.connect" in results[0]["content"][0]["text"]
    assert "toolConfig" in second.json


def test_boto3_is_not_imported_for_other_providers(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from agent_health.session import build_judges; from agent_health import define_config;"
        "build_judges(define_config(judge={'provider': 'openai', 'model': 'm', "
        "'settings': {'base_url': 'http://127.0.0.1:9'}}));"
        "print('boto3' in sys.modules, 'dagster' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.split() == ["False", "False"]


def test_bedrock_verdict_comes_from_the_forced_tool_call(bedrock_server):
    verdict = {"nonce": NONCE, "pass": False, "score": 0.3, "reasoning": "the database is not named"}
    bedrock_server.script.append(converse_reply("Let me submit my verdict.", tool_uses=[("verdict", verdict)]))
    v = run_one(bedrock_server)
    assert (v.passed, v.score, v.errored) == (False, 0.3, False), v.error
    assert len(bedrock_server.posts()) == 1


def test_bedrock_model_rejecting_tool_choice_falls_back_to_text_once(bedrock_server):
    def reply(rec):
        if "toolConfig" in rec.json:
            return (
                400,
                {"x-amzn-ErrorType": "ValidationException"},
                {"message": "This model doesn't support the toolConfig.toolChoice.tool field."},
            )
        return converse_reply(verdict_json(True, 0.8))

    bedrock_server.default = reply

    async def main():
        settings = JudgeSettings(
            provider="bedrock",
            model=MODEL,
            backoff_s=0.01,
            settings={"region": REGION, "endpoint_url": bedrock_server.url},
        )
        service = JudgeService.from_settings(settings)
        try:
            return [await service.judge(make_request(criteria=c)) for c in ("claim one", "claim two")]
        finally:
            await service.aclose()

    verdicts = asyncio.run(main())
    assert [(v.passed, v.errored) for v in verdicts] == [(True, False), (True, False)], verdicts[0].error
    assert ["toolConfig" in r.json for r in bedrock_server.posts()] == [True, False, False]
