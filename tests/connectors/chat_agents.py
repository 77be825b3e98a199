"""Conversational agents on 127.0.0.1 for the conversation tests: an OpenAI-compatible chat agent
(it answers from the whole message history it is sent), a REST agent that keeps its own sessions
(it gives a session id and expects it back), and an AG-UI agent (one thread, the messages so far);
plus python agents. Each answer says what the agent saw, so a test reads whether the conversation
reached it."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

from tests.support import LocalHTTPServer, QuietHandler


class ChatAgents:
    """One threaded server with the three agents; `requests[path]` lists the bodies each received."""

    def __init__(self) -> None:
        self.requests: dict[str, list[Any]] = {}
        self.sessions: dict[str, list[str]] = {}
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        agents = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw) if raw else None
                path = self.path.split("?")[0]
                with agents._lock:
                    agents.requests.setdefault(path, []).append(body)
                    agents.counts[path] += 1
                if path == "/v1/chat/completions":
                    self.send_json(agents.chat(body))
                elif path == "/session":
                    self.send_json(agents.session(body))
                elif path == "/agui":
                    self.send_sse(agents.agui(body))
                else:
                    self.send_json({"error": f"no route {path}"}, 404)

            def send_json(self, doc: Any, status: int = 200) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def send_sse(self, events: list[dict[str, Any]]) -> None:
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = LocalHTTPServer(Handler).start()
        self.url = self.httpd.url

    def total(self) -> int:
        """Requests received so far, over every agent."""
        return sum(self.counts.values())

    @staticmethod
    def chat(body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI-compatible chat agent: it answers from the whole history it is sent."""
        messages = body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        answer = f"[{len(messages)} messages] you said {users[-1]!r}; first you said {users[0]!r}"
        if len(users) == 1:
            answer += ". Which order is it?"
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body.get("model") or "chat-agent",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": 10 * len(messages),
                "completion_tokens": 5,
                "total_tokens": 10 * len(messages) + 5,
            },
        }

    def session(self, body: dict[str, Any]) -> dict[str, Any]:
        """A REST agent that keeps each conversation on its side: a new session id when it does not
        know the one it is sent, and what it heard in that session so far."""
        sid = body.get("session_id") or ""
        with self._lock:
            if sid not in self.sessions:
                sid = f"sess-{len(self.sessions) + 1}"
                self.sessions[sid] = []
            self.sessions[sid].append(body["message"])
            heard = list(self.sessions[sid])
        return {"output": f"session {sid} heard: " + " | ".join(heard), "session_id": sid}

    @staticmethod
    def agui(body: dict[str, Any]) -> list[dict[str, Any]]:
        """An AG-UI agent: one run per request on the thread it is given, answering from the messages."""
        tid, rid, messages = body["threadId"], body["runId"], body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        text = f"thread {tid} run {rid}: {len(messages)} messages, you said {users[-1]!r}"
        return [
            {"type": "RUN_STARTED", "threadId": tid, "runId": rid},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m-{rid}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{rid}", "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m-{rid}"},
            {"type": "RUN_FINISHED", "threadId": tid, "runId": rid},
        ]

    def close(self) -> None:
        self.httpd.close()


PYTHON_CALLS: Counter[str] = Counter()


def history_agent(prompt: str, messages: list[dict[str, Any]]) -> str:
    """A python agent called per turn with the conversation so far."""
    PYTHON_CALLS["history"] += 1
    users = [m["content"] for m in messages if m["role"] == "user"]
    return f"turn {len(users)}: you said {prompt!r}; before that {users[:-1]!r}"


def session_agent(prompt: str, session: dict[str, Any]) -> dict[str, Any]:
    """A python agent that keeps its own state in the conversation's session object."""
    PYTHON_CALLS["session"] += 1
    notes = session.setdefault("notes", [])
    notes.append(prompt)
    return {
        "output": f"noted {len(notes)}: {' / '.join(notes)}",
        "usage": {"input_tokens": 7, "output_tokens": 3, "model": "py-model"},
    }


def one_shot_agent(prompt: str) -> str:
    """A python agent that takes only the prompt: it cannot hold a conversation."""
    return f"answer to {prompt!r}"


def agent_settings(url: str) -> list[dict[str, Any]]:
    """The agents of these tests, as `define_config(agents=...)` takes them."""
    return [
        {
            "key": "chat",
            "connector": "http",
            "settings": {
                "endpoint": url + "/v1/chat/completions",
                "body_template": {"model": "chat-agent", "messages": "{{messages}}"},
            },
            "versions": {"v1": {}},
        },
        {
            "key": "sess",
            "connector": "http",
            "settings": {
                "endpoint": url + "/session",
                "body_template": {"message": "{{prompt}}", "session_id": "{{session_id}}"},
            },
            "versions": {"v1": {}},
        },
        {"key": "agui", "connector": "agui", "settings": {"endpoint": url + "/agui"}, "versions": {"v1": {}}},
        {
            "key": "py",
            "connector": "python",
            "settings": {"function": "tests.connectors.chat_agents:history_agent"},
            "versions": {"v1": {}, "session": {"function": "tests.connectors.chat_agents:session_agent"}},
        },
    ]
