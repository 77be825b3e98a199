"""The `subprocess` connector: run a command per test.

Settings (see `SubprocessSettings`): `command` (string or list) and `args`; the prompt goes on
stdin (`prompt_via: stdin`, as text or as the JSON request with `stdin_format: json`) or as an
argument (`prompt_via: arg`, replacing `{prompt}` in args or appended). Output is parsed as JSON
(same shapes as the http connector), plain text, or a JSON-lines event stream
(`output_format: auto|json|text|jsonl`). The process gets `TRACEPARENT` and
`AGENT_HEALTH_RUN_ID`, plus `env` and the test's own env; files provisioned by the test are
written to a fresh folder named by `AGENT_HEALTH_FILES_DIR`. It runs in its own process group,
which is killed as a whole on timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent_health.config.secrets import register_log_secrets
from agent_health.connectors.common import ConnectorSettings, RealConnector
from agent_health.connectors.parsing import ParseError, as_text, parse_args, parse_body, usage_of
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest
from agent_health.model.limits import Bytes


class SubprocessSettings(ConnectorSettings):
    """Settings of the subprocess connector."""

    command: str | list[str] = Field(description="Program and leading arguments (a string is split like a shell).")
    args: list[str] = Field(default_factory=list, description="More arguments; `{prompt}` and `{run_id}` are replaced.")
    prompt_via: Literal["stdin", "arg"] = Field("stdin", description="Where the prompt goes.")
    stdin_format: Literal["text", "json"] = Field("text", description="stdin: prompt text, or the request as JSON.")
    output_format: Literal["auto", "json", "text", "jsonl"] = Field("auto", description="How stdout is read.")
    cwd: str | None = Field(None, description="Working directory (relative to the project root).")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    inherit_env: bool = Field(True, description="Start from the harness's environment.")
    response_paths: dict[str, str] = Field(default_factory=dict, description="Paths into JSON output.")
    max_output_bytes: Bytes = Field(10 * 1024 * 1024, description="Larger stdout is an error.")


class SubprocessConnector(RealConnector):
    name = "subprocess"
    settings_model = SubprocessSettings
    settings: SubprocessSettings

    def __init__(self, agent: Any):
        super().__init__(agent)
        cmd = self.settings.command
        self.argv0 = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        if not self.argv0:
            from agent_health.errors import ConfigError

            raise ConfigError(f"setting agents.{agent.key}.settings.command is empty")
        for k, v in self.settings.env.items():  # literal env values are the usual place for a key
            if any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")):
                self.secrets.add(v)
        register_log_secrets(self.secrets)

    @property
    def endpoint(self) -> str:
        cmd = self.agent.settings.get("command")
        return self.secrets.scrub_text(cmd if isinstance(cmd, str) else " ".join(map(str, cmd or [])))

    def _argv(self, request: AgentRequest) -> list[str]:
        values = {"prompt": request.prompt, "run_id": request.run_id}
        args = [
            a.replace("{prompt}", values["prompt"]).replace("{run_id}", values["run_id"]) for a in self.settings.args
        ]
        if self.settings.prompt_via == "arg" and not any("{prompt}" in a for a in self.settings.args):
            args.append(request.prompt)
        return self.argv0 + args

    def _stdin(self, request: AgentRequest) -> bytes:
        if self.settings.prompt_via == "arg":
            return b""
        if self.settings.stdin_format == "json":
            return json.dumps(
                {
                    "prompt": request.prompt,
                    "context": list(request.context),
                    "run_id": request.run_id,
                    "provisioned": request.provisioned,
                    "model": self.settings.model,
                },
                default=str,
            ).encode()
        return request.prompt.encode()

    async def run(self, request: AgentRequest) -> RunResult:
        if not request.files:
            return await self._run(request, {})
        # Provisioned files live in a fresh folder per run, named by AGENT_HEALTH_FILES_DIR.
        with tempfile.TemporaryDirectory(prefix="agent-health-files-") as folder:
            self._write_files(Path(folder), request.files)
            return await self._run(request, {"AGENT_HEALTH_FILES_DIR": folder})

    def _write_files(self, folder: Path, files: dict[str, Any]) -> None:
        for name, content in files.items():
            path = (folder / name).resolve()
            if not path.is_relative_to(folder.resolve()):
                raise self.fail(f"provisioned file name {name!r} points outside the files folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(
                    content if isinstance(content, str) else json.dumps(content, default=str), encoding="utf-8"
                )

    async def _run(self, request: AgentRequest, extra_env: dict[str, str]) -> RunResult:
        s = self.settings
        env = dict(os.environ) if s.inherit_env else {"PATH": os.environ.get("PATH", "")}
        env.update(s.env)
        env.update(request.env)
        env.update(extra_env)
        env.update({"TRACEPARENT": request.traceparent, "AGENT_HEALTH_RUN_ID": request.run_id})
        cwd = str((Path(s.root) / s.cwd).resolve()) if s.cwd else s.root
        outgoing = await self.apply_before(
            {"argv": self._argv(request), "env": env, "cwd": cwd, "stdin": self._stdin(request)}, request
        )
        started = time.perf_counter()
        limit = self.run_timeout(request)
        try:
            proc = await asyncio.create_subprocess_exec(
                *outgoing["argv"],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=outgoing["cwd"],
                env=outgoing["env"],
                start_new_session=True,
            )  # own process group, so a timeout kills its children too
        except OSError as exc:
            raise self.fail(f"cannot start: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(limit):
                stdout, stderr = await self._communicate(proc, outgoing["stdin"])
        except TimeoutError:
            self._kill(proc)
            await proc.wait()
            raise self.fail(f"timed out after {limit:g}s; killed its process group") from None
        except BaseException:
            self._kill(proc)
            raise
        finally:
            self._kill(proc)  # stray children of a finished process
        if proc.returncode != 0:
            tail = stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
            raise self.fail(f"exited with status {proc.returncode}" + (f": {' | '.join(tail)}" if tail else ""))
        try:
            text = stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"output is not valid UTF-8: byte 0x{stdout[exc.start : exc.start + 1].hex()} at offset {exc.start}"
            ) from None
        output, steps, usage, raw = self._parse(text)
        result = RunResult(
            output=output,
            trajectory=tuple(steps),
            run_id=request.run_id,
            trace_id=request.trace_id,
            agent=self.agent.ref,
            prompt=request.prompt,
            context=request.context,
            duration_ms=(time.perf_counter() - started) * 1000,
            usage=usage,
            raw_events=tuple(raw),
        )
        return await self.apply_after(
            {"stdout": text, "stderr": stderr.decode("utf-8", "replace"), "returncode": proc.returncode}, result
        )

    async def _communicate(self, proc: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
        cap = self.settings.max_output_bytes

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                if data:
                    proc.stdin.write(data)
                    await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent does not read stdin

        async def read(stream: asyncio.StreamReader, limit: int) -> bytes:
            out = bytearray()
            while chunk := await stream.read(65536):
                out += chunk
                if len(out) > limit:
                    self._kill(proc)
                    raise self.fail(f"output too large: more than max_output_bytes={cap}")
            return bytes(out)

        assert proc.stdout is not None and proc.stderr is not None
        _, out, err = await asyncio.gather(feed(), read(proc.stdout, cap), read(proc.stderr, cap))
        await proc.wait()
        return out, err

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _parse(self, text: str) -> tuple[str, list[Step], Usage, list[Any]]:
        fmt = self.settings.output_format
        stripped = text.strip()
        if fmt == "auto":
            lines = [ln for ln in stripped.splitlines() if ln.strip()]
            if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines):
                fmt = "jsonl"
            elif stripped.startswith(("{", "[")):
                fmt = "json"
            else:
                fmt = "text"
        if fmt == "text":
            return (
                stripped,
                [Step(kind="message", content=stripped)] if stripped else [],
                Usage(model=self.settings.model),
                [{"type": "stdout", "text": stripped}],
            )
        if fmt == "json":
            try:
                data = json.loads(stripped)
            except ValueError as exc:
                raise self.fail(f"malformed JSON output: {exc}; output starts {stripped[:80]!r}") from None
            try:
                out, steps, usage = parse_body(data, self.settings.response_paths, self.settings.model)
            except ParseError as exc:
                raise self.fail(str(exc)) from None
            return out, steps, usage, [data]
        return self._parse_jsonl(stripped)

    def _parse_jsonl(self, text: str) -> tuple[str, list[Step], Usage, list[Any]]:
        """Events: {"type": message|thinking|tool_call|tool_result|final|usage|error, ...}."""
        steps: list[Step] = []
        raw: list[Any] = []
        output: str | None = None
        usage = Usage(model=self.settings.model)
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError as exc:
                raise self.fail(f"malformed JSON on output line {n}: {exc}") from None
            raw.append(ev)
            if not isinstance(ev, dict):
                continue
            kind = ev.get("type") or ev.get("kind")
            if kind in ("message", "thinking"):
                steps.append(Step(kind=kind, content=as_text(ev.get("content", ev.get("text", "")))))
            elif kind == "tool_call":
                steps.append(
                    Step(
                        kind="tool_call",
                        tool=ev.get("tool") or ev.get("name"),
                        args=parse_args(ev.get("args", ev.get("arguments"))),
                        call_id=ev.get("call_id") or ev.get("id"),
                    )
                )
            elif kind == "tool_result":
                steps.append(
                    Step(
                        kind="tool_result",
                        tool=ev.get("tool") or ev.get("name"),
                        call_id=ev.get("call_id") or ev.get("id"),
                        content=as_text(ev.get("content")),
                        is_error=bool(ev.get("is_error")),
                    )
                )
            elif kind in ("final", "output", "result"):
                output = as_text(ev.get("output", ev.get("content", ev.get("text"))))
            elif kind == "usage":
                usage = usage_of(ev, self.settings.model)
            elif kind == "error":
                raise self.fail(f"agent reported an error: {ev.get('message') or ev.get('error') or ev}")
        if output is None:
            output = next((s.content for s in reversed(steps) if s.kind == "message"), "")
        elif not steps or steps[-1].kind != "message" or steps[-1].content != output:
            steps.append(Step(kind="message", content=output))
        return output, steps, usage, raw
