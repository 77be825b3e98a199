"""`--reporter json[=FILE]`: the versioned RunReport schema."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_health.model import RunReport
from agent_health.reporters.base import Reporter
from agent_health.stores.atomic import write_atomic


class JsonReporter(Reporter):
    def __init__(self, path: str | None = None):
        self.path = path

    def finish(self, report: RunReport) -> None:
        text = report.model_dump_json(indent=2)
        if self.path:
            write_atomic(Path(self.path), text)
        else:
            sys.stdout.write(text + "\n")
