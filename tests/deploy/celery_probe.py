"""The project's Celery worker app (agent_health_dagster.celery_worker) with one more task that
holds a worker slot for a while and says which worker ran it: what tests/deploy/test_celery_route.py
sends to see how the workers share tasks, without Dagster's steps around them."""

from __future__ import annotations

import time
from typing import Any

from agent_health_dagster.celery_worker import app


@app.task(bind=True, name="agent_health_probe_hold")
def hold(self: Any, seconds: float) -> str:
    time.sleep(seconds)
    return str(self.request.hostname)
