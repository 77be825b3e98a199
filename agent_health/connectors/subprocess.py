"""The `subprocess` connector: run a command per test.

Settings (see `SubprocessSettings`): `command` (string or list) and `args`; the prompt goes on
stdin (`prompt_via: stdin`, as text or as the JSON request with `stdin_format: json`) or as an
argument (`prompt_via: arg`, replacing `{prompt}` in args or appended). Output is parsed as JSON
(same shapes as the http connector), plain text, or a JSON-lines event stream
(`output_format: auto|json|text|jsonl`). The process gets `TRACEPARENT` and
`AGENT_HEALTH_RUN_ID`, plus `env` and the test's own env; files provisioned by the test are
written to a fresh folder named by `AGENT_HEALTH_FILES_DIR`; files it writes into the fresh folder
named by `AGENT_HEALTH_ARTIFACTS_DIR` become the run's artifacts. It runs in its own process group,
which is killed as a whole when it exits or times out. A descendant that left the group and the
session (`setsid()`, a daemon) is found by a tag in its environment (`AGENT_HEALTH_PROCESS_TAG`,
unique to the agent's process, inherited by everything it starts; the way Jenkins finds a
build's processes) and killed with it (Linux: read from /proc).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import mimetypes
import os
import shlex
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent_health.config.secrets import register_log_secrets
from agent_health.connectors.common import ConnectorSettings, RealConnector, shown
from agent_health.connectors.parsing import ParseError, as_text, parse_args, parse_body, usage_of
from agent_health.errors import ConfigError
from agent_health.model import Artifact, RunResult, Step, Usage
from agent_health.model.agent import AgentRequest
from agent_health.model.limits import ARTIFACTS_RUN_MAX, Bytes

# After the agent exits, how long its output is still read: a process that left its group (a
# daemon) may hold the pipes open forever, while what the agent wrote is already in them.
_DRAIN_S = 2.0
PROCESS_TAG = "AGENT_HEALTH_PROCESS_TAG"  # in the environment of an agent process and all it starts
_PROC = Path("/proc")


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
    max_artifact_bytes: Bytes = Field(
        1024 * 1024,
        description="An artifact up to this size is stored with the result; a larger one only by name, size and hash.",
    )


class SubprocessConnector(RealConnector):
    name = "subprocess"
    settings_model = SubprocessSettings
    settings: SubprocessSettings

    def __init__(self, agent: Any):
        super().__init__(agent)
        cmd = self.settings.command
        self.argv0 = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        if not self.argv0:
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
        # A fresh folder per run: provisioned files in files/ (AGENT_HEALTH_FILES_DIR, when the test
        # gives any), and artifacts/ (AGENT_HEALTH_ARTIFACTS_DIR), whose files become the run's artifacts.
        with tempfile.TemporaryDirectory(prefix="agent-health-run-") as folder:
            extra = {"AGENT_HEALTH_ARTIFACTS_DIR": str(Path(folder) / "artifacts")}
            (Path(folder) / "artifacts").mkdir()
            if request.files:
                self._write_files(Path(folder) / "files", request.files)
                extra["AGENT_HEALTH_FILES_DIR"] = str(Path(folder) / "files")
            result = await self._run(request, extra)
            found = collect_artifacts(Path(folder) / "artifacts", self.settings.max_artifact_bytes)
            return result.model_copy(update={"artifacts": result.artifacts + found}) if found else result

    def _write_files(self, folder: Path, files: dict[str, Any]) -> None:
        folder.mkdir()
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
        loop = asyncio.get_running_loop()
        tag = uuid.uuid4().hex
        try:
            transport, agent = await loop.subprocess_exec(
                lambda: _AgentProcess(loop, self.settings.max_output_bytes, tag),
                *outgoing["argv"],
                cwd=outgoing["cwd"],
                env={**outgoing["env"], PROCESS_TAG: tag},
                start_new_session=True,  # own process group, so its children can be killed with it
            )
        except OSError as exc:
            raise self.fail(f"cannot start: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(limit):
                returncode = await agent.communicate(transport, outgoing["stdin"])
        except TimeoutError:
            raise self.fail(f"timed out after {limit:g}s; killed its process group") from None
        finally:
            _kill_group(transport.get_pid())  # what is left of it: a timed-out agent, stray children
            if not agent.swept:  # timed out or cancelled: the processes that left its group too
                kill_tagged(tag)
            transport.close()  # our ends of the pipes, even when a process outside the group holds them
        if agent.too_large:
            raise self.fail(f"output too large: more than max_output_bytes={self.settings.max_output_bytes}")
        stdout, stderr = bytes(agent.out), bytes(agent.err)
        if returncode != 0:
            raise self.fail(self.exit_problem(returncode, stdout, stderr))
        try:
            text = stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"output is not valid UTF-8: byte 0x{stdout[exc.start : exc.start + 1].hex()} at offset {exc.start}"
            ) from None
        output, steps, usage, raw = self._parse(text)
        result = self.run_result(
            request,
            output,
            steps,
            usage=usage,
            raw_events=raw,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        silence = "it exited with status 0 and printed nothing" if not text.strip() else f"its output is {shown(text)}"
        return await self.apply_after(
            {"stdout": text, "stderr": stderr.decode("utf-8", "replace"), "returncode": returncode},
            result,
            silence=silence,
        )

    def exit_problem(self, returncode: int | None, stdout: bytes, stderr: bytes) -> str:
        """What a non-zero exit says: the status and the last lines of stderr."""
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        return f"exited with status {returncode}" + (f": {' | '.join(tail)}" if tail else "")

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
                Usage(model=self.settings.model, unreported=True),
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
        usage = Usage(model=self.settings.model, unreported=True)  # until a usage event says
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


def collect_artifacts(folder: Path, max_bytes: int, total: int = ARTIFACTS_RUN_MAX) -> tuple[Artifact, ...]:
    """The files under `folder` as artifacts, by relative name; each up to `max_bytes` stored as
    text (UTF-8) or base64, a larger one described only (its copy would bloat every stored result).
    Copies stop at `total` bytes for the run (no run stores more, docs/limits.md): the files past
    it are described only, without being read into memory."""
    found: list[Artifact] = []
    if not folder.is_dir():
        return ()
    left = total
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.relative_to(folder).as_posix()
        artifact = artifact_of(path, name, min(max_bytes, left) if left > 0 else -1)
        if artifact.content is not None:
            left -= len(artifact.content)
        elif artifact.size <= max_bytes:  # small enough for a copy, but the run's copies are full
            note = f"copy not stored: this run's artifact copies reached {total:,} bytes (ARTIFACTS_RUN_MAX)"
            artifact = artifact.model_copy(update={"omitted": note})
        found.append(artifact)
    return tuple(found)


def artifact_of(path: Path, name: str, max_bytes: int) -> Artifact:
    """One file as an artifact named `name` (see `collect_artifacts`)."""
    size = path.stat().st_size
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if size > max_bytes:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return Artifact(name=name, media_type=media, size=size, sha256=digest.hexdigest())
    data = path.read_bytes()
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
        if media == "application/octet-stream":
            media = "text/plain"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return Artifact(
        name=name,
        media_type=media,
        size=size,
        sha256=hashlib.sha256(data).hexdigest(),
        content=content,
        encoding=encoding,
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tagged(tag: str) -> int:
    """SIGKILL every process whose environment holds `PROCESS_TAG=tag`: an agent's descendants,
    also those that left its process group and session. How many were killed (0 where there is
    no /proc)."""
    marker = f"{PROCESS_TAG}={tag}".encode()
    killed = 0
    try:
        entries = [e for e in os.listdir(_PROC) if e.isdigit()]
    except OSError:
        return 0
    me = os.getpid()
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        try:
            with open(_PROC / entry / "environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or another user's
            continue
        if marker in environ.split(b"\0"):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


class _AgentProcess(asyncio.SubprocessProtocol):
    """One agent process: stdin fed, stdout and stderr collected, its exit noticed on its own.

    The agent is done when it exits, not when its pipes close: a child it left behind (`tool &`)
    holds them open, so the output read by then is the answer. Its group and every process with
    its tag are killed at exit, which closes the pipes; what is still in them is read for at most
    `_DRAIN_S` (a child that cleared its environment and left the group may hold them forever)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cap: int, tag: str):
        self.cap, self.tag = cap, tag
        self.swept = False  # its group and every process with its tag were killed after its exit
        self.out, self.err = bytearray(), bytearray()
        self.too_large = False
        self.exited: asyncio.Future[None] = loop.create_future()  # the process ended (or its output is too big)
        self.closed: asyncio.Future[None] = loop.create_future()  # the process ended and every pipe closed
        self.pid = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.pid = transport.get_pid()  # type: ignore[attr-defined]

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        into = self.out if fd == 1 else self.err
        into += data
        if len(into) > self.cap and not self.too_large:
            self.too_large = True
            _kill_group(self.pid)
            self._done(self.exited)

    def process_exited(self) -> None:
        self._done(self.exited)

    def connection_lost(self, exc: Exception | None) -> None:
        self._done(self.exited)
        self._done(self.closed)

    @staticmethod
    def _done(future: asyncio.Future[None]) -> None:
        if not future.done():
            future.set_result(None)

    async def communicate(self, transport: asyncio.SubprocessTransport, data: bytes) -> int | None:
        """Feed `data`, wait for the exit, drain the pipes; the exit status."""
        stdin = transport.get_pipe_transport(0)
        if stdin is not None:
            try:
                if data:
                    stdin.write(data)  # type: ignore[attr-defined]
                stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent does not read stdin
        await self.exited
        if not self.too_large:
            _kill_group(self.pid)  # the children it left behind let go of the pipes
            # and those that left its group (a daemon): reading /proc takes milliseconds, off the loop
            await asyncio.shield(asyncio.to_thread(kill_tagged, self.tag))
            self.swept = True
            try:
                async with asyncio.timeout(_DRAIN_S):
                    await asyncio.shield(self.closed)
            except TimeoutError:
                pass
        return transport.get_returncode()
