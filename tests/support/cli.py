"""`agent-health ARGS` in the test process, for tests that only need a command's output, exit code
and files: the CLI's own entry (`agent_health.cli.main.invoke`, what the console script runs before
it exits), without the ~0.3-1 s of a new interpreter and its imports per call.

`cli_in_process` takes and returns what `tests.conftest.run_cli` does (a `CompletedProcess` with
text stdout and stderr), and leaves the test process as it found it: working folder, environment
(`AGENT_HEALTH_CONFIG` removed as for a child process), stdin/stdout/stderr, the root logger's
handlers (none during the call, so warnings reach stderr as in a new process), sys.path, the modules
eval files, configurations and python agents imported (a second project's `agent.py` is not the
first one's), the span store's open files and indexes, the warnings said once per process, and the
garbage collector (`run` freezes it). Output is written to real files, as a child's is to its pipes
(the watchdog's last-resort exit needs a descriptor to dump to).

Keep a separate process (`tests.conftest.run_cli`) where the process itself is the subject:
signals, kill -9, broken pipes, exit codes set by exit hooks or `os._exit`, threads left running at
exit, faulthandler, umask, environment read at interpreter start, or a hang the run must survive.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_SIGNALS = tuple(
    s
    for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGUSR2", None), getattr(signal, "SIGPROF", None))
    if s is not None
)
_KEEP = tuple(
    str(Path(p).resolve())
    for p in {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(__file__).resolve().parents[2] / "agent_health"),
        str(Path(__file__).resolve().parents[2] / "agent_health_dagster"),
    }
)


def _kept(module: object) -> bool:
    """A module imported during a run that later runs may reuse: the library's own and installed
    packages (their import is the slow part); anything else came from a test's project."""
    file = getattr(module, "__file__", None)
    if not file:
        return getattr(module, "__path__", None) is None or all(
            str(Path(p).resolve()).startswith(_KEEP) for p in getattr(module, "__path__", [])
        )
    return str(Path(file).resolve()).startswith(_KEEP)


def _reset_process_state() -> None:
    """What a new process would start without: the span store's writers and indexes and the
    warnings said once per process."""
    spans = sys.modules.get("agent_health.traces.local")
    if spans is not None:
        spans.reset()
    base = sys.modules.get("agent_health.stores.base")
    if base is not None:
        base._skipped_runs.clear()
    secrets = sys.modules.get("agent_health.config.secrets")
    if secrets is not None:
        secrets._warned.clear()


@contextlib.contextmanager
def _isolated(cwd: Path, env: dict[str, str] | None) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    saved_handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    root = logging.getLogger()
    saved_logging = root.handlers[:]  # pytest's capture handlers
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
        try:
            os.environ.update(env or {})
            os.environ.pop("AGENT_HEALTH_CONFIG", None)
            os.chdir(cwd)
            # as in a new process, no handler: the library's warnings reach stderr (logging's last resort)
            root.handlers[:] = []
            importlib.invalidate_caches()  # files the test just wrote in a folder already imported from
            # a child's standard streams: UTF-8, stdout strict and stderr backslashreplace
            sys.stdin = io.TextIOWrapper(null, encoding="utf-8")
            sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
            sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
            yield out, err
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            root.handlers[:] = saved_logging
            _reset_process_state()
            gc.unfreeze()
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.path[:] = saved_path
            for name in set(sys.modules) - saved_modules:
                if not _kept(sys.modules[name]):
                    del sys.modules[name]
            for sig, handler in saved_handlers.items():
                if signal.getsignal(sig) is not handler and handler is not None:
                    signal.signal(sig, handler)


def cli_in_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`agent-health ARGS` run in this process from `cwd` with `env` added to the environment: its
    exit code and its stdout and stderr as text. (`timeout` is taken for the same call as
    `run_cli`'s; the suite's per-test timeout stops a hang.)"""
    from agent_health.cli.main import invoke

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # none: the run's own loop can run here
        pass
    else:
        raise RuntimeError("cli_in_process: an event loop runs in this thread (playwright?); use run_cli")
    with _isolated(Path(cwd), env) as (out, err):
        try:
            code = invoke(list(args))
        except SystemExit as exc:  # what a process would have exited with
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", errors="backslashreplace")
        stderr = err.read().decode("utf-8", errors="backslashreplace")
    return subprocess.CompletedProcess(["agent-health", *args], code, stdout, stderr)
