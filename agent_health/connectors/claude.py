"""The `claude` connector: run Claude Code headless (`claude -p --output-format stream-json --verbose`)
per test and read its event stream into the trajectory.

It is the subprocess connector (same timeouts, process-group kill, env, provisioned files and
`AGENT_HEALTH_ARTIFACTS_DIR`) with Claude Code's command line and stream format: the prompt goes on
stdin; each stdout line is one JSON event:

- `{"type": "system", "subtype": "init", "model", "tools", "session_id", ...}`: a system step;
- `{"type": "assistant", "message": {"id", "content": [text | thinking | tool_use blocks], "usage"}}`:
  message, thinking and tool_call steps (the message's usage on its first step);
- `{"type": "user", "message": {"content": [tool_result blocks]}}`: tool_result steps (role `tool`);
- `{"type": "result", "subtype", "is_error", "result", "usage", "total_cost_usd", "num_turns"}`: the
  answer, the run's usage and the cost Claude Code reported. A stream without it is an error.

Files Claude Code wrote with its Write tool that still exist after the run are artifacts too.

A conversation resumes Claude Code's session: each turn after the first runs `claude -p --resume
<session id>` with the session id the previous turn's events gave, and the turn's message on stdin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent_health.connectors.parsing import as_text
from agent_health.connectors.subprocess import SubprocessConnector, SubprocessSettings, artifact_of
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest

# What `claude -p` needs to print the event stream (stream-json requires --verbose in print mode).
STREAM_ARGS = ("-p", "--output-format", "stream-json", "--verbose")


class ClaudeSettings(SubprocessSettings):
    """Settings of the claude connector (besides the subprocess connector's)."""

    command: str | list[str] = Field("claude", description="The Claude Code executable (and leading arguments).")
    max_turns: int | None = Field(None, ge=1, description="`--max-turns`: agentic turns before it stops.")
    allowed_tools: list[str] = Field(default_factory=list, description="`--allowedTools`: tools it may use unasked.")
    permission_mode: str | None = Field(None, description="`--permission-mode`, e.g. acceptEdits or plan.")
    append_system_prompt: str | None = Field(None, description="`--append-system-prompt`: added to its system prompt.")
    output_format: Literal["auto", "json", "text", "jsonl"] = Field(
        "jsonl", description="Fixed: Claude Code prints stream-json lines."
    )


class ClaudeConnector(SubprocessConnector):
    name = "claude"
    settings_model = ClaudeSettings
    settings: ClaudeSettings

    def conversation_problem(self) -> str | None:
        return None  # each turn resumes the session the one before started

    def session_of(self, result: RunResult) -> dict[str, Any]:
        """The Claude Code session the turn ran in (its init or result event says), for `--resume`."""
        for ev in reversed(result.raw_events):
            if isinstance(ev, dict) and ev.get("type") in ("result", "system") and ev.get("session_id"):
                return {"claude_session_id": str(ev["session_id"])}
        return {}

    def _argv(self, request: AgentRequest) -> list[str]:
        s = self.settings
        opts: list[str] = list(STREAM_ARGS)
        if request.turn > 1 and request.session.get("claude_session_id"):
            opts += ["--resume", str(request.session["claude_session_id"])]
        if s.model:
            opts += ["--model", s.model]
        if s.max_turns is not None:
            opts += ["--max-turns", str(s.max_turns)]
        if s.allowed_tools:
            opts += ["--allowedTools", ",".join(s.allowed_tools)]
        if s.permission_mode:
            opts += ["--permission-mode", s.permission_mode]
        if s.append_system_prompt:
            opts += ["--append-system-prompt", s.append_system_prompt]
        return self.argv0 + opts + super()._argv(request)[len(self.argv0) :]

    def _stdin(self, request: AgentRequest) -> bytes:
        if self.settings.prompt_via == "arg":
            return b""
        if not request.context:
            return request.prompt.encode()
        parts = [f"{c.get('description') or 'Context'}:\n{c.get('value', '')}" for c in request.context]
        return (request.prompt + "\n\n" + "\n\n".join(parts)).encode()

    def exit_problem(self, returncode: int | None, stdout: bytes, stderr: bytes) -> str:
        # Claude Code exits non-zero after an error result; that result says what went wrong.
        problem = super().exit_problem(returncode, stdout, stderr)
        for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("type") == "result":
                return f"{problem}; its result event says: {_result_error(ev)}"
        return problem

    async def _run(self, request: AgentRequest, extra_env: dict[str, str]) -> RunResult:
        result = await super()._run(request, extra_env)
        # Files it wrote with the Write tool and that are still there are what it produced.
        root = Path(self.settings.root) / (self.settings.cwd or "")
        seen: set[Path] = set()
        found = []
        for call in result.tool_calls("Write"):
            name = (call.args or {}).get("file_path")
            if not isinstance(name, str):
                continue
            path = (root / name).resolve()
            if path in seen or not path.is_file():
                continue
            if path.is_relative_to(Path(extra_env["AGENT_HEALTH_ARTIFACTS_DIR"]).resolve()):
                continue  # collected from the artifacts folder already
            seen.add(path)
            found.append(
                artifact_of(path, name, self.settings.max_artifact_bytes).model_copy(update={"uri": path.as_uri()})
            )
        return result.model_copy(update={"artifacts": result.artifacts + tuple(found)}) if found else result

    def _parse(self, text: str) -> tuple[str, list[Step], Usage, list[Any]]:
        steps: list[Step] = []
        raw: list[Any] = []
        final: dict[str, Any] | None = None
        model = self.settings.model
        messages: set[str] = set()  # assistant message ids: one model call each, usage counted once
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError as exc:
                raise self.fail(
                    f"malformed stream-json on output line {n}: {exc}; the line starts {line[:80]!r}"
                ) from None
            raw.append(ev)
            if not isinstance(ev, dict):
                raise self.fail(f"stream-json output line {n} is not an event object: {line[:80]!r}")
            kind = ev.get("type")
            if kind == "system" and ev.get("subtype") == "init":
                model = model or ev.get("model")
                steps.append(Step(kind="message", role="system", content=_init_summary(ev)))
            elif kind == "assistant":
                message = ev.get("message") or {}
                usage = message.get("usage") or {}
                mid = message.get("id") or f"line-{n}"
                first = mid not in messages
                messages.add(mid)
                for block in message.get("content") or []:
                    step = _assistant_step(block)
                    if step is None:
                        continue
                    if first and usage:  # several events may carry one message's blocks and usage
                        step = step.model_copy(
                            update={"input_tokens": _input_tokens(usage), "output_tokens": usage.get("output_tokens")}
                        )
                        first = False
                    steps.append(step)
            elif kind == "user":
                message = ev.get("message") or {}
                content = message.get("content")
                blocks = content if isinstance(content, list) else []
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        call_id = block.get("tool_use_id")
                        tool = next((s.tool for s in steps if s.kind == "tool_call" and s.call_id == call_id), None)
                        steps.append(
                            Step(
                                kind="tool_result",
                                role="tool",
                                tool=tool,
                                call_id=call_id,
                                content=as_text(block.get("content")),
                                is_error=bool(block.get("is_error")),
                            )
                        )
            elif kind == "result":
                final = ev
        if final is None:
            raise self.fail(
                f"Claude Code's stream ended without a result event ({len(raw)} event(s) read); "
                "was it run with --output-format stream-json --verbose, and did it finish?"
            )
        if final.get("is_error") or (final.get("subtype") or "success") != "success":
            raise self.fail(f"Claude Code reported an error: {_result_error(final)}")
        output = as_text(final.get("result"))
        if output and not any(s.kind == "message" and s.role == "assistant" and s.content == output for s in steps):
            steps.append(Step(kind="message", content=output))
        u = final.get("usage") or {}
        cost = final.get("total_cost_usd")
        usage = Usage.of(
            _input_tokens(u),
            int(u.get("output_tokens") or 0),
            model=model,
            llm_calls=len(messages),
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
        )
        return output, steps, usage, raw


def _input_tokens(usage: dict[str, Any]) -> int:
    """Input tokens as OpenTelemetry counts them: fresh, cache writes and cache reads together."""
    return sum(
        int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _assistant_step(block: Any) -> Step | None:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return Step(kind="message", content=str(block.get("text") or ""))
    if kind in ("thinking", "redacted_thinking"):
        return Step(kind="thinking", content=str(block.get("thinking") or ""))
    if kind in ("tool_use", "server_tool_use"):
        args = block.get("input")
        return Step(
            kind="tool_call",
            tool=block.get("name"),
            args=args if isinstance(args, dict) else {"_raw": args},
            call_id=block.get("id"),
        )
    return None


def _init_summary(ev: dict[str, Any]) -> str:
    tools = ev.get("tools") or []
    return (
        f"Claude Code session {ev.get('session_id') or '?'}: model {ev.get('model') or '?'}, "
        f"cwd {ev.get('cwd') or '?'}, {len(tools)} tool(s): {', '.join(map(str, tools))}"
    )


def _result_error(ev: dict[str, Any]) -> str:
    text = as_text(ev.get("result")) or "; ".join(map(str, ev.get("errors") or [])) or "no message"
    return f"{ev.get('subtype') or 'error'} after {ev.get('num_turns', '?')} turn(s): {text[:300]}"
