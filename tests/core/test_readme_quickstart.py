"""The README's quickstart runs as written, from a fresh copy of the project (every file git tracks,
nothing the developer's checkout made: no .agent_health, no config), in a fresh shell whose PATH
holds no venv: the files it gives are written where their first line says, then its commands run
in document order in one shell session, each ending with the exit code its comment states
(`# exits N`, else 0). Its set-up commands make `.venv`; here `.venv` is the venv these tests run in
(no network). The HTTP agent is a real server on 127.0.0.1: the quickstart's port 8000 is
replaced with the server's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_health.stores import LocalResultStore
from tests.conftest import ROOT
from tests.core.test_readme_commands import commands
from tests.support import LocalHTTPServer, QuietHandler, skip_or_fail

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
MARK = "@@quickstart-exit"


def quickstart() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("\n## Quickstart", 1)[1].split("\n## ", 1)[0]


def fresh_copy(dest: Path) -> None:
    """The files a clone of this checkout would have (tracked, and new files not ignored), as they
    are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    if listed.returncode != 0:
        skip_or_fail(f"not a git checkout: {listed.stderr.decode()[-300:]}")
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


class Greeter(QuietHandler):
    """An HTTP agent: greets the name its prompt gives, and remembers the requests it got."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        name = re.search(r"hello to (\w+)", body["prompt"])
        answer = json.dumps({"output": f"Hello, {name.group(1) if name else 'you'}!"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def agent_server():
    Greeter.requests = []
    with LocalHTTPServer(Greeter) as server:
        yield server


def test_the_readme_quickstart_runs_from_a_fresh_copy(tmp_path, agent_server):
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix) or not (venv / "bin" / "activate").is_file():
        skip_or_fail("the tests do not run in a venv (scripts/test.sh makes .venv)")
    project = tmp_path / "agent-health"
    project.mkdir()
    fresh_copy(project)
    assert (project / "README.md").is_file() and not (project / ".agent_health").exists()
    (project / ".venv").symlink_to(venv, target_is_directory=True)

    # the files, where their first line says; the quickstart writes new files only
    written = []
    shell: list[tuple[str, int]] = []
    for lang, code in FENCE.findall(quickstart()):
        first = code.splitlines()[0]
        if lang == "python":
            path = project / first.removeprefix("# ").strip()
            assert first.startswith("# ") and not path.exists(), first
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code.replace("http://127.0.0.1:8000/", f"{agent_server.url}/"))
            written.append(path.relative_to(project).as_posix())
        else:
            assert lang == "bash", lang
            shell += commands(code)
    assert written == ["evals/first.eval.py", "my-agent/agent_health_config.py", "my-agent/evals/hello.eval.py"]

    # the commands, in one shell session, in order
    script = "".join(f'{command}\necho "{MARK} $?"\n' for command, _ in shell)
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        cwd=project,
        env={"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    chunks = re.split(rf"^{MARK} (\d+)\n", done.stdout, flags=re.M)
    outputs, codes = chunks[0:-1:2], [int(c) for c in chunks[1::2]]
    assert len(codes) == len(shell), done.stdout[-5000:]  # every command ran (none ended the shell)
    for (command, expected), code, out in zip(shell, codes, outputs):
        assert code == expected, f"{command!r} exited {code}, not {expected}:\n{out[-3000:]}"
        assert "Traceback" not in out, out

    # 1. the first eval against the demo agent: what the README says each run prints
    [activate, v2, v1, mine] = outputs
    assert activate == ""
    assert re.search(r"│ demo@v2 │ +1 │ +1 │ +0 │ +0 │ +100% │", v2), v2
    assert re.search(r"│ demo@v1 │ +1 │ +0 │ +1 │ +0 │ +0% │", v1), v1
    assert "to_have_called_tool('get_metrics'): tool 'get_metrics' was not called; called: ['search_logs']" in v1, v1
    for out in (v2, v1):
        assert re.search(r"^Run \d{8}T\d{6}-\w+$", out, re.M) and ".agent_health/results" in out, out
    store = LocalResultStore(project / ".agent_health" / "results")
    results = {r.agent: r for r in store.get_many(store.list())}
    assert {a: r.status for a, r in results.items()} == {"demo@v2": "passed", "demo@v1": "failed"}
    assert results["demo@v2"].test_id == "first::checkout-latency-finds-the-cache"
    assert any(s.kind == "judge" and s.passed for s in results["demo@v2"].signals)  # the demo judge ran

    # 2. the same against an HTTP agent, from its own folder and configuration
    assert re.search(r"│ mine@v1 │ +1 │ +1 │ +0 │ +0 │ +100% │", mine), mine
    assert [(r["path"], r["prompt"]) for r in Greeter.requests] == [("/invoke", "Say hello to Ada.")]
    own = LocalResultStore(project / "my-agent" / ".agent_health" / "results")
    [result] = own.get_many(own.list())
    assert (result.agent, result.status, result.run.output if result.run else None) == (
        "mine@v1",
        "passed",
        "Hello, Ada!",
    )
