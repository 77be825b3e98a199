"""An evaluation run: one CLI invocation or one Dagster run, with what it ran and how it ended.

Stores keep every run's manifest and its results (see `agent_health.stores`), so a run can be
reported, compared or re-judged later by its id, and one killed mid-way keeps what finished.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.report import BudgetSpend, RunSummary
from agent_health.model.result import SCHEMA_VERSION
from agent_health.model.settings import RunSettings

RunStatus = Literal["running", "finished", "incomplete", "interrupted", "abandoned"]

# While a run goes, its manifest is written again every HEARTBEAT_S (`heartbeat_at`). A `running`
# manifest whose process is gone (on this host), or whose heartbeat is older than ABANDONED_AFTER_S
# (another host, or no way to look at the process), is shown `abandoned`: a run killed with
# SIGKILL, out of memory, or with its machine; it never wrote its end.
HEARTBEAT_S = 30.0
ABANDONED_AFTER_S = 5 * HEARTBEAT_S
_PROC = "/proc"


class RunProcess(BaseModel):
    """The process that runs a run: where to look whether it is still there."""

    model_config = ConfigDict(frozen=True)

    host: str = Field(description="Host name of the machine the run runs on.")
    pid: int = Field(description="Process id on that host.")
    started: str | None = Field(
        None,
        description="Tells this process from a later one given the same pid: on Linux the boot id and the "
        "process's start time; None where the system does not say.",
    )


def _started(pid: int) -> str | None:
    """The boot id and start time (clock ticks since boot) of process `pid`, or None."""
    try:
        with open(f"{_PROC}/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        with open(f"{_PROC}/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command may hold spaces and parentheses
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def this_process() -> RunProcess:
    """The calling process, as a run's manifest records it."""
    pid = os.getpid()
    return RunProcess(host=socket.gethostname(), pid=pid, started=_started(pid))


def process_gone(process: RunProcess) -> bool | None:
    """True when `process` ended (or its pid is another process's now), False when it still runs,
    None when this host cannot tell (another host; a pid alive where start times are unknown)."""
    if process.host != socket.gethostname():
        return None
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's: its start time cannot be compared either
        pass
    if process.started is None:
        return None
    return _started(process.pid) != process.started  # None: it ended since os.kill looked


def new_run_id(now: float | None = None) -> str:
    """Sortable and unique: `YYYYMMDDTHHMMSS-<8 hex>` (UTC)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{os.urandom(4).hex()}"


class EvalRun(BaseModel):
    """The manifest of one evaluation run. Written when the run starts and again when it ends;
    a run that never wrote its end (killed) reads back as `running` with its results so far."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = Field(SCHEMA_VERSION, description="Version of this schema.")
    id: str = Field(default_factory=new_run_id, description="Run id, sortable by start time.")
    transport: Literal["cli", "dagster", "api"] = Field("api", description="What started the run.")
    status: RunStatus = Field(
        "running",
        description="running until the run ends; finished; incomplete when it ended but not every result could "
        "be stored (`not_stored`); interrupted on Ctrl-C or SIGTERM; abandoned (shown by readers) when it never "
        "wrote its end and its process is gone.",
    )
    started_at: float = Field(default_factory=time.time, description="Unix time the run started.")
    finished_at: float | None = Field(None, description="Unix time the run ended; None while running.")
    harness_version: str = Field("", description="agent-health version that ran it.")
    settings: RunSettings = Field(default_factory=RunSettings, description="The run's settings (no secrets).")
    agents: tuple[str, ...] = Field((), description="Agent versions the run covered, as KEY@VERSION.")
    tests: int = Field(0, description="Tests selected per agent version.")
    summaries: tuple[RunSummary, ...] = Field((), description="One per agent version, when the run ended.")
    not_run: dict[str, int] = Field(
        default_factory=dict, description="Agent version -> tests never started (fail-fast, interruption)."
    )
    not_run_reason: str | None = Field(
        None, description="Why tests were not run: 'budget reached', 'fail-fast' or 'interrupted'."
    )
    budget: BudgetSpend | None = Field(None, description="Spend against the budget, when the run had one.")
    not_stored: int = Field(
        0, description="Results the run made that the store could not take (a full disk, a store gone)."
    )
    load_errors: tuple[str, ...] = Field((), description="Eval files or tests that failed to load.")
    hook_errors: tuple[str, ...] = Field((), description="after_all hooks that failed.")
    warnings: tuple[str, ...] = Field(
        (),
        description="Gating judges demoted to observe (or refused) because they miss judge.calibration; artifact "
        "copies the run's cap left out (ARTIFACTS_RUN_MAX).",
    )
    rejudge_of: str | None = Field(
        None,
        description="For a re-judging run: what it re-judged (a run id, an agent version's latest results, a store).",
    )
    process: RunProcess | None = Field(None, description="The process running it (None in older manifests).")
    heartbeat_at: float | None = Field(
        None, description=f"Unix time the running process last rewrote this manifest (every {HEARTBEAT_S:g} s)."
    )
    abandoned: str | None = Field(
        None,
        description="Why a run shows as abandoned: it never wrote its end and its process is gone or its "
        "heartbeat stopped (set by readers, `EvalRun.as_seen`; never by the run).",
    )

    def as_seen(self, now: float | None = None) -> EvalRun:
        """The run as a reader should show it: `abandoned` (with why) when its manifest says
        `running` but its process is gone (on this host) or its heartbeat is older than
        ABANDONED_AFTER_S (elsewhere). A manifest without either (older versions) stays `running`."""
        if self.status != "running":
            return self
        why = None
        gone = process_gone(self.process) if self.process is not None else None
        if gone:
            assert self.process is not None
            why = f"its process {self.process.pid} on {self.process.host} ended without finishing the run"
        elif gone is None and self.heartbeat_at is not None:
            silent = (time.time() if now is None else now) - self.heartbeat_at
            if silent > ABANDONED_AFTER_S:
                where = f" (process {self.process.pid} on {self.process.host})" if self.process else ""
                why = f"no heartbeat for {silent:.0f} s{where}; it runs no more"
        if why is None:
            return self
        return self.model_copy(update={"status": "abandoned", "abandoned": why})
