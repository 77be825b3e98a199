"""One torn or empty `run.json` (a disk that filled while it was rewritten, a copy cut short) hid
every run: `serve` answered 503 for the whole list and `report` with no argument exited 2, though
the newest run was intact. Wherever runs are listed, a run whose manifest cannot be read is left
out with one warning naming it, and the others are listed as before."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import boto3
import httpx
import pytest

from agent_health.config import Config
from agent_health.model import EvalRun
from agent_health.stores import LocalResultStore, ResultStore, open_store
from tests.reporters.test_serve import CONFIG, _results, start_serve
from tests.reports.helpers import store_run
from tests.stores.conftest import STORE_TYPES, new_store_settings
from tests.support.cli import cli_in_process

OLD, NEW, TORN, EMPTY = (
    "20260101T000000-0000aaa1",
    "20260102T000000-0000aaa2",
    "20260103T000000-0000aaa3",
    "20260104T000000-0000aaa4",
)


def damaged_project(tmp_path):
    """A project whose store holds two intact runs and, newer than both, one run with a torn
    manifest and one with an empty manifest (their results are intact)."""
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    store_run(store, OLD, _results(2), started_at=1000.0)
    store_run(store, NEW, _results(3), started_at=2000.0)
    for run_id, started in ((TORN, 3000.0), (EMPTY, 4000.0)):
        store_run(store, run_id, _results(1), started_at=started)
    runs = store.root / "_runs"
    torn = runs / TORN / "run.json"
    torn.write_bytes(torn.read_bytes()[:40])
    (runs / EMPTY / "run.json").write_bytes(b"")
    return store, [torn, runs / EMPTY / "run.json"]


def _warnings(text: str, path) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning:") and str(path) in line]


def test_report_without_a_source_reports_the_newest_readable_run(tmp_path):
    _, bad = damaged_project(tmp_path)
    done = cli_in_process("report", "-o", "page.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"from run {NEW}" in done.stdout  # the newest run that can be read
    assert "Traceback" not in done.stderr
    for path in bad:
        assert len(_warnings(done.stderr, path)) == 1, done.stderr  # one warning, naming the file
    assert f"agent-health report: run {NEW}" in (tmp_path / "page.html").read_text()


def test_serve_lists_every_readable_run_and_warns_once_per_damaged_one(tmp_path):
    _, bad = damaged_project(tmp_path)
    server = start_serve(cwd=tmp_path)
    try:
        for _ in range(3):  # the page polls the list: still one warning per damaged run
            status, body = server.get("/api/runs")
            assert status == 200, body
            assert [r["id"] for r in json.loads(body)["runs"]] == [NEW, OLD]
        status, _ = server.get(f"/runs/{NEW}/report")
        assert status == 200
    finally:
        code, out = server.stop()
    assert code == 0 and "Traceback" not in out
    for path in bad:
        assert len(_warnings(out, path)) == 1, out


@pytest.fixture(params=STORE_TYPES)
def store_with_damaged_run(request, tmp_path) -> tuple[ResultStore, str]:
    """A store of each kind holding an intact run and, newer, a run whose manifest is torn;
    the name by which the warning must point at the torn manifest."""
    kind = request.param
    settings = new_store_settings(kind, request, tmp_path)
    store = open_store(Config(root=str(tmp_path)), settings)
    for run_id, started in ((OLD, 1000.0), (TORN, 2000.0)):
        store.put_run(EvalRun(id=run_id, transport="cli", started_at=started, agents=("demo@v1",), tests=1))
        store.put_many([r.model_copy(update={"eval_run_id": run_id}) for r in _results(1)])
    s = settings.settings
    if kind == "local":
        manifest = Path(s["path"]) / "_runs" / TORN / "run.json"
        manifest.write_text('{"id": "' + TORN + '", "sta')
        return store, str(manifest)
    if kind == "s3":
        key = f"team/evals/_runs/{TORN}/run.json"
        boto3.client("s3", endpoint_url=s["endpoint_url"], region_name="us-east-1").put_object(
            Bucket=s["bucket"], Key=key, Body=b""
        )
        return store, f"s3://{s['bucket']}/{key}"
    doc = f"run|{TORN}"
    body = {"kind": "run", "key": TORN, "run_id": TORN, "started_at": 2000.0, "run": {"id": TORN, "started_at": "torn"}}
    reply = httpx.put(f"{s['url']}/{s['index']}-runs/_doc/{quote(doc, safe='')}?refresh=true", json=body, timeout=30)
    assert reply.status_code in (200, 201), reply.text
    return store, f"index {s['index']}-runs document {doc}"


def test_every_store_lists_runs_past_a_damaged_manifest(store_with_damaged_run, caplog):
    store, where = store_with_damaged_run
    with caplog.at_level("WARNING"):
        assert [r.id for r in store.list_runs()] == [OLD]
        assert [r.id for r in store.list_runs()] == [OLD]
    said = [r.getMessage() for r in caplog.records if where in r.getMessage()]
    assert len(said) == 1, caplog.text  # once, naming the manifest
    assert TORN in said[0] and "skipped" in said[0]
