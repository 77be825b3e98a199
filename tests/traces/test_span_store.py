"""The local span store keeps memory flat in the number of runs, writes from a background thread
(lines reach the file soon, without a read), and survives its folder being cleaned mid-way."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import tracemalloc

from agent_health.traces import local
from agent_health.traces.local import LocalSpanStore, LocalTraceSource
from agent_health.traces.source import RunRef

from ..conftest import ROOT


def _spans(trace_id: str, run_id: str, n: int = 8) -> list[dict]:
    return [
        {
            "trace_id": trace_id,
            "span_id": f"{i:016x}",
            "name": f"execute_tool step_{i}",
            "service": "demo-agent",
            "start_ms": 1000.0 + i,
            "end_ms": 1001.0 + i,
            "attributes": {"agent_health.run.id": run_id, "gen_ai.usage.input_tokens": 10, "payload": "x" * 800},
        }
        for i in range(n)
    ]


def test_memory_stays_flat_in_the_number_of_runs_and_old_runs_are_still_read(tmp_path):
    local.reset()
    store = LocalSpanStore(tmp_path / "spans")
    store.write_spans(_spans("warm", "warm"))
    tracemalloc.start()

    def after(runs: range) -> int:
        for i in runs:
            store.write_spans(_spans(f"{i:032x}", f"run-{i}"))
        local.flush_all()  # the background writer's queue is not what is measured
        return tracemalloc.get_traced_memory()[0]

    first = after(range(1500))  # about 15 MB of span records: past the in-memory window of recent lines
    second = after(range(1500, 3000))  # as many again
    tracemalloc.stop()
    # flat: the second half adds only its small per-run index entries, not its records
    assert second - first < 1_500_000, f"memory grew {(second - first) / 1e6:.1f} MB for the second 1,500 runs"
    source = LocalTraceSource(store.root)
    oldest = source.fetch(RunRef(run_id="run-0", trace_id=f"{0:032x}"))  # long out of memory: read back
    assert oldest.correlation == "trace_id" and len(oldest.spans) == 8
    newest = source.peek(RunRef(run_id="run-2999", trace_id=f"{2999:032x}"))  # still in memory
    assert newest is not None and len(newest.spans) == 8
    assert source.peek(RunRef(run_id="run-0", trace_id=f"{0:032x}")) is None
    local.reset()


def test_runs_whose_spans_are_read_from_memory_cost_no_index_and_a_miss_indexes_them(tmp_path):
    local.reset()
    store = LocalSpanStore(tmp_path / "spans")
    source = LocalTraceSource(store.root)
    store.write_spans(_spans("warm", "warm"))
    tracemalloc.start()

    def after(runs: range) -> int:
        for i in runs:
            store.write_spans(_spans(f"{i:032x}", f"run-{i}", n=1))
            assert source.peek(RunRef(run_id=f"run-{i}", trace_id=f"{i:032x}")) is not None  # each run read back
        local.flush_all()
        # what the span store itself holds: threads other tests left behind allocate elsewhere
        held = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, local.__file__)])
        return sum(stat.size for stat in held.statistics("filename"))

    first = after(range(1000))
    second = after(range(1000, 13000))
    tracemalloc.stop()
    # indexed as written, 12,000 runs held about 2.3 MB of index; read from memory, nothing grows but
    # the window of recent lines and the writer's buffers, which move by up to about 0.35 MB
    assert second - first < 1_000_000, f"memory grew {(second - first) / 1e6:.2f} MB for 12,000 runs read from memory"
    # a run long out of memory is still found, by trace id and by run id: the miss indexes the files
    assert len(source.fetch(RunRef(run_id="run-7", trace_id=f"{7:032x}")).spans) == 1
    assert len(store.by_run_id("run-12990")) == 1
    local.reset()


def test_a_trace_written_in_batches_is_read_whole_from_memory_or_files(tmp_path):
    local.reset()
    store = LocalSpanStore(tmp_path / "spans")
    source = LocalTraceSource(store.root)
    trace, run = "a" * 32, RunRef(run_id="run-a", trace_id="a" * 32)
    store.write_spans(_spans(trace, "run-a", n=2))
    assert len(source.fetch(run).spans) == 2  # read (and indexed) once
    store.write_spans(_spans(trace, "run-a", n=3)[2:])  # a later batch of the same trace
    peeked = source.peek(run)  # both lines are in memory
    assert peeked is not None and len(peeked.spans) == 3
    assert len(source.fetch(run).spans) == 3  # the indexed key is read again with the new line
    for i in range(local._RECENT_LINES + 10):  # the trace's lines leave memory
        store.write_spans(_spans(f"{i:032x}", f"run-{i}", n=1))
    store.write_spans(_spans(trace, "run-a", n=4)[3:])  # and one more batch, in memory alone
    assert source.peek(run) is None  # memory holds only part of it
    assert len(source.fetch(run).spans) == 4
    assert len(store.by_run_id("run-a")) == 4
    local.reset()


def test_lines_reach_the_file_without_a_read_and_another_process_sees_them(tmp_path):
    local.reset()
    store = LocalSpanStore(tmp_path / "spans")
    store.write_spans(_spans("a" * 32, "run-a"))
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and not any(p.stat().st_size for p in (tmp_path / "spans").glob("*.jsonl")):
        time.sleep(0.01)
    code = (
        "import sys; from agent_health.traces.local import LocalTraceSource; "
        "from agent_health.traces.source import RunRef; "
        f"f = LocalTraceSource({str(tmp_path / 'spans')!r}).fetch(RunRef(run_id='run-a', trace_id='a' * 32)); "
        "print(len(f.spans))"
    )
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert out.stdout.strip() == "8", out.stderr
    local.reset()


def test_a_folder_cleaned_mid_way_gets_new_files(tmp_path):
    local.reset()
    store = LocalSpanStore(tmp_path / "spans")
    source = LocalTraceSource(store.root)
    store.write_spans(_spans("b" * 32, "run-b"))
    assert len(source.fetch(RunRef(run_id="run-b", trace_id="b" * 32)).spans) == 8
    shutil.rmtree(tmp_path / "spans")
    store.write_spans(_spans("c" * 32, "run-c"))
    local.flush_all()
    assert list((tmp_path / "spans").glob("*.jsonl"))  # written again, to new files
    local._INDEXES[str(store.root.resolve())].recent.clear()  # force the read from the file
    assert len(source.fetch(RunRef(run_id="run-c", trace_id="c" * 32)).spans) == 8
    assert source.fetch(RunRef(run_id="run-b", trace_id="b" * 32)).spans == []  # cleaned away
    local.reset()
