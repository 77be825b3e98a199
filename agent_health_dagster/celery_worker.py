"""The Celery app of agent-health's Celery workers, for the `celery` executor
($AGENT_HEALTH_EXECUTOR=celery; docs/deploy.md, "The Celery route, step by step"):

    celery -A agent_health_dagster.celery_worker worker --concurrency 1 --hostname worker-a@%h

It is dagster-celery's worker app (`dagster_celery.app`) with the broker and result backend of
$AGENT_HEALTH_CELERY_BROKER and $AGENT_HEALTH_CELERY_BACKEND, the variables the run workers send
steps through, and the same Celery settings (`build.CELERY_CONFIG`): no separate YAML to keep in
step, and no RabbitMQ on localhost when a file is forgotten. Importing it needs the `celery` extra
and the broker variable (without it the worker exits naming the variable)."""

from __future__ import annotations

from typing import Any

from dagster_celery.config import DEFAULT_CONFIG
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from agent_health.errors import ConfigError
from agent_health_dagster.defs.build import CELERY_CONFIG, celery_urls

try:
    _broker, _backend = celery_urls()
except ConfigError as exc:  # the worker command ends with the one message, not a loader traceback
    raise SystemExit(f"agent-health: {exc}") from None
# dagster-celery's functions carry no annotations
app: Any = make_app(  # type: ignore[no-untyped-call]
    {"broker": _broker, "backend": _backend, "config_source": {**DEFAULT_CONFIG, **CELERY_CONFIG}}
)
execute_plan = create_task(app)  # type: ignore[no-untyped-call]
