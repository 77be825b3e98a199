"""The disk under the state folder fills up during a run. The store's messages and exit 2 were
right, but the span writer's thread and its exit hook printed tracebacks, and the span files and
the run's results.jsonl kept torn last lines. Now the span error is one line, said once, and
every file under the state folder holds whole lines only.

The full disk is real: a 400 kB tmpfs mounted on the state folder inside a private user and
mount namespace (`unshare -Urm`), with most of it filled beforehand. No root is needed (on a
kernel that allows unprivileged user namespaces) and the mount dies with the process. The
alternatives are less faithful: RLIMIT_FSIZE fails writes with EFBIG (after a SIGXFSZ), not
ENOSPC, a loop device needs root, and /dev/full cannot hold a folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.faults.conftest import ROOT, process_env
from tests.faults.lifecycle import budget

SCRIPT = """
set -u
mount -t tmpfs -o size=400k tmpfs state
dd if=/dev/zero of=state/filler bs=1k count=330 2>/dev/null
"$PYTHON" -m agent_health run evals --reporter jsonl=out/r.jsonl
code=$?
rm -f state/filler
cp -a state/. after/
exit $code
"""


def _namespaces_work() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="needs unshare -Urm (unprivileged user namespaces)")
def test_a_full_disk_under_the_state_folder_is_reported_once_and_leaves_no_torn_line(tmp_path):
    for folder in ("state", "after", "out"):
        (tmp_path / folder).mkdir()
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config(state_dir='state')\n"
    )
    p = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", SCRIPT],
        cwd=tmp_path,
        env=process_env({"PYTHON": sys.executable}),
        capture_output=True,
        text=True,
        timeout=budget(60),
    )
    err = p.stderr
    assert p.returncode == 2, p.stdout + err  # the store could not write everything: 2
    assert "Traceback" not in err and "Exception in thread" not in err and "Exception ignored" not in err, err
    assert "No space left on device" in err
    assert err.count("cannot write spans") == 1, err  # said once, however many flushes failed
    assert "results: result store" not in err  # the store is named once per message
    written = [p for p in (tmp_path / "after").rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json")]
    assert any(p.name == "results.jsonl" for p in written) and any(p.parent.name == "spans" for p in written)
    for path in written:
        data = path.read_bytes()
        if path.suffix == ".json":  # a result file or a manifest: replaced atomically, whole or absent
            json.loads(data)
            continue
        assert not data or data.endswith(b"\n"), f"{path}: torn last line"
        for n, line in enumerate(data.splitlines(), 1):
            try:
                json.loads(line)
            except ValueError:
                raise AssertionError(f"{path}:{n}: torn line {line[:80]!r}") from None
    # what the jsonl reporter (outside the full disk) saw: whole lines
    assert (tmp_path / "out" / "r.jsonl").read_text().endswith("\n")
