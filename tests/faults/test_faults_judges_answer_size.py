"""A judge answer had no size limit: a 512 MB answer from an OpenAI-compatible judge took the CLI to
3.2 GB, where an agent's answer stops at `max_response_bytes`. Now the judge's answer is read as a
stream up to the provider's `max_response_bytes` (10 MB by default, docs/limits.md): past it the
reading stops, the connection is dropped and the verdict is errored naming the limit and the judge.
The judge is a real HTTP server on 127.0.0.1; the judging runs in its own process, whose peak
memory is measured."""

from __future__ import annotations

import json
import threading

import pytest

from agent_health.config.model import JudgeSettings
from tests.faults.conftest import python
from tests.judges.helpers import Recorded, chat, nonce_of, verdict_json
from tests.support import LocalHTTPServer, QuietHandler

MB = 1 << 20
DEFAULT_LIMIT = 10 * MB
HUGE = 256 * MB  # what the judge sends; the process must not hold anything like it


class HugeJudge:
    """An OpenAI-compatible judge that answers the first request with a real verdict and every
    later one with `size` bytes of a JSON answer, chunked (no Content-Length) or declaring its
    length up front."""

    def __init__(self, size: int, declare_length: bool = False):
        self.sent = 0
        self.requests = 0
        judge = self
        lock = threading.Lock()

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    judge.requests += 1
                    first = judge.requests == 1
                if first:
                    nonce = nonce_of(Recorded("POST", self.path, {}, raw)) or "no-nonce"
                    body = json.dumps(chat(verdict_json(True, 0.9, nonce=nonce))[2]).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                head = b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "'
                tail = b'"}}]}'
                block = b"a" * MB
                blocks = max(1, size // MB)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("connection", "close")
                if declare_length:
                    self.send_header("content-length", str(len(head) + blocks * MB + len(tail)))
                else:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    self._send(head, declare_length)
                    for _ in range(blocks):
                        self._send(block, declare_length)
                        judge.sent += len(block)
                    self._send(tail, declare_length)
                    if not declare_length:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client stopped reading and hung up: what it should do
                    pass
                self.close_connection = True

            def _send(self, data: bytes, raw: bool) -> None:
                self.wfile.write(data if raw else b"%x\r\n%s\r\n" % (len(data), data))

        self.server = LocalHTTPServer(Handler).start()
        self.url = self.server.url

    def close(self) -> None:
        self.server.close()


JUDGE_ONCE = """
import asyncio, json
from agent_health.config.model import JudgeSettings
from agent_health.judges.service import JudgeService
from tests.judges.helpers import make_request

def status(field):  # this process's own memory, in bytes (VmHWM: its peak since the reset below)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

async def main():
    service = JudgeService.from_settings(JudgeSettings(**json.loads({settings!r})))
    try:
        warm = await service.judge(make_request("warms the imports and the connection up"))
        assert not warm.errored, warm.error
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak starts again from here
        before = status("VmRSS")
        verdict = await service.judge(make_request())
        peak = status("VmHWM")
        print(json.dumps({{"errored": verdict.errored, "passed": verdict.passed, "error": verdict.error,
                          "growth": peak - before}}))
    finally:
        await service.aclose()

asyncio.run(main())
"""


def judge_in_a_process(judge: HugeJudge, tmp_path, **provider) -> dict:
    settings = {
        "provider": "openai",
        "model": "judge-model",
        "settings": {"base_url": judge.url + "/v1", **provider},
        "cache": False,
    }
    JudgeSettings(**settings)  # valid as written
    done = python(JUDGE_ONCE.format(settings=json.dumps(settings)), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("declare_length", [False, True], ids=["chunked", "content-length"])
def test_a_huge_judge_answer_is_an_errored_verdict_and_memory_stays_bounded(tmp_path, declare_length):
    judge = HugeJudge(HUGE, declare_length=declare_length)
    try:
        out = judge_in_a_process(judge, tmp_path)
    finally:
        judge.close()
    assert out["errored"] and not out["passed"], out
    assert f"max_response_bytes={DEFAULT_LIMIT}" in out["error"], out["error"]
    assert f"openai:judge-model at {judge.url}/v1" in out["error"]  # the judge
    assert out["growth"] < 64 * MB, f"peak memory grew {out['growth'] / MB:.0f} MB for a {HUGE // MB} MB answer"
    assert judge.sent < HUGE // 2  # the reading stopped: the judge could not send it all


def test_the_bound_is_a_setting(tmp_path):
    judge = HugeJudge(2 * MB)
    try:
        out = judge_in_a_process(judge, tmp_path, max_response_bytes=100_000)
    finally:
        judge.close()
    assert out["errored"] and "max_response_bytes=100000" in out["error"], out


@pytest.mark.parametrize("value", [0, -1, 2 << 30, "lots", float("inf")])
def test_a_bound_out_of_range_is_refused_naming_the_setting(value):
    with pytest.raises(ValueError, match=r"judge\.settings\.max_response_bytes"):
        JudgeSettings(provider="openai", model="m", settings={"max_response_bytes": value})
