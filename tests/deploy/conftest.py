"""A Dagster home with deploy/postgres/dagster.yaml on a fresh database of the session's real
PostgreSQL (directly or through PgBouncer), and the environment its processes need."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.postgres import Postgres, fresh_database

TEMPLATE = ROOT / "deploy" / "postgres" / "dagster.yaml"


@dataclass
class PgHome:
    """DAGSTER_HOME and the environment (DAGSTER_PG_*) of an instance on PostgreSQL."""

    path: Path
    pg: Postgres

    def env(self) -> dict[str, str]:
        return {"DAGSTER_HOME": str(self.path), **self.pg.env()}


def make_home(tmp_path: Path, server: Postgres, name: str = "home", via: Postgres | None = None) -> PgHome:
    """A fresh database on `server`, reached directly or through `via` (a PgBouncer)."""
    db = fresh_database(server, f"dagster_{uuid.uuid4().hex[:10]}")
    if via is not None:
        db = Postgres(via.host, via.port, db.db, db.user)
    home = tmp_path / name
    home.mkdir()
    shutil.copy(TEMPLATE, home / "dagster.yaml")
    return PgHome(home, db)


@pytest.fixture
def pg_home(tmp_path: Path, postgres: Postgres) -> PgHome:
    return make_home(tmp_path, postgres)
