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
import re
import shutil
import subprocess
import sys

import pytest

from agent_health.stores import LocalResultStore
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
    assert any(p.parent.name == "spans" for p in written)
    # A batch of results is stored whole or not at all: when the first batch already found the disk
    # full (all of the run's results came in one), the run log was never started.
    # (The reporter's file lies outside the full disk: it holds every result of the run.)
    ran = sum("test_id" in json.loads(line) for line in (tmp_path / "out" / "r.jsonl").read_text().splitlines())
    none_stored = re.search(r"(\d+) results could not be stored", err)
    assert any(p.name == "results.jsonl" for p in written) or (none_stored and int(none_stored[1]) == ran), err
    for path in written:
        data = path.read_bytes()
        if path.suffix == ".json":  # a result file or a manifest: replaced atomically, whole or absent
            json.loads(data)
            continue
        assert not data or data.endswith(b"\n"), f"{path}: torn last line"
        for n, line in enumerate(data.splitlines(), 1):
            if not line and path.name == "_index.jsonl":  # each batch's lines start on a line of their own
                continue
            try:
                json.loads(line)
            except ValueError:
                raise AssertionError(f"{path}:{n}: torn line {line[:80]!r}") from None
    # what the jsonl reporter (outside the full disk) saw: whole lines
    assert (tmp_path / "out" / "r.jsonl").read_text().endswith("\n")


FORTY = "tests:\n" + "".join(f"  - name: case {i}\n    prompt: Diagnose outage {i}.\n" for i in range(40))


@pytest.mark.skipif(not _namespaces_work(), reason="needs unshare -Urm (unprivileged user namespaces)")
@pytest.mark.parametrize("filled_kb", [250, 300, 320])
def test_on_a_full_disk_stored_and_not_stored_add_up_and_the_manifest_does_not_say_finished(tmp_path, filled_kb):
    """40 tests on a filling disk said '17 stored' and '24 results could not be stored': a batch
    whose run-log lines were written before a result file failed counted as not stored, yet read
    back as stored. A batch is now stored whole or not at all, and a run whose results were not
    all stored says `incomplete` (with how many), never `finished`."""
    for folder in ("state", "after", "out", "evals"):
        (tmp_path / folder).mkdir()
    (tmp_path / "evals" / "forty.yaml").write_text(FORTY)
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config(state_dir='state')\n"
    )
    script = SCRIPT.replace("count=330", f"count={filled_kb}")
    p = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script],
        cwd=tmp_path,
        env=process_env({"PYTHON": sys.executable}),
        capture_output=True,
        text=True,
        timeout=budget(60),
    )
    err = p.stderr
    assert p.returncode == 2 and "No space left on device" in err and "Traceback" not in err, p.stdout + err
    said_stored = re.search(r"(\d+) result\(s\) stored", err)
    stored = int(said_stored.group(1)) if said_stored else 0
    said_lost = re.search(r"(\d+) results could not be stored", err)
    lost = int(said_lost.group(1)) if said_lost else (1 if "the run goes on without it" in err else 0)
    assert stored + lost == 40, err
    store = LocalResultStore(tmp_path / "after" / "results")
    [run_dir] = (tmp_path / "after" / "results" / "_runs").iterdir()
    assert len(list(store.run_results(run_dir.name))) == stored  # what reads back is what was said stored
    assert len(store.list()) == stored
    run = store.get_run(run_dir.name)
    assert run is not None and run.status != "finished"
    if run.status == "incomplete":  # its end could be written
        assert run.not_stored == lost
    else:  # the disk took not even the end: the run shows as abandoned (its process is gone)
        assert run.status == "running" and run.as_seen().status == "abandoned"
