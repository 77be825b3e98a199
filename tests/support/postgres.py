"""pytest plugin: a real PostgreSQL from Debian's `postgresql` package (initdb and pg_ctl on a free
port of 127.0.0.1, under a temporary folder) and PgBouncer (Debian's `pgbouncer`) in front of it,
each started once per session. Both refuse to run as root, so as root they run as the
`postgres` user the package creates. Missing binaries skip (CI: fail) with the reason.

Also usable outside pytest (benchmarks): `with running_postgres(folder) as pg: ...`."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.net import free_port, wait_for_port
from tests.support.processes import stop
from tests.support.services import skip_or_fail

DB_NAME = "dagster"
DB_USER = "agent_health"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL or PgBouncer is not installed or did not start."""


@dataclass(frozen=True)
class Postgres:
    """Where a running server listens (trust auth on 127.0.0.1: no password to keep)."""

    host: str
    port: int
    db: str = DB_NAME
    user: str = DB_USER

    def url(self, scheme: str = "postgresql+psycopg2") -> str:
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{self.db}"

    def env(self) -> dict[str, str]:
        """The environment deploy/postgres/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": self.db,
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": "",
        }


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise PostgresUnavailable(f"{name} not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    return found[-1]


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(_as_owner(cmd), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise PostgresUnavailable(f"{what} failed (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-1500:]}")


@contextlib.contextmanager
def running_postgres(folder: Path, max_connections: int = 200) -> Iterator[Postgres]:
    """initdb a cluster in `folder`, start it on a free port, create the dagster database."""
    folder.mkdir(parents=True, exist_ok=True)
    _own(folder)
    data, port = folder / "data", free_port()
    _run([_bin("initdb"), "-D", str(data), "-A", "trust", "-U", DB_USER, "-E", "UTF8"], "initdb")
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={folder} -c fsync=off "
        f"-c max_connections={max_connections}"
    )
    log = folder / "postgres.log"
    _run([_bin("pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"], "pg_ctl start")
    try:
        _run([_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, DB_NAME], "createdb")
        yield Postgres("127.0.0.1", port)
    finally:
        subprocess.run(_as_owner([_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]), capture_output=True)


@contextlib.contextmanager
def running_pgbouncer(pg: Postgres, folder: Path, pool_mode: str = "session") -> Iterator[Postgres]:
    """PgBouncer on a free port in front of `pg` (`pool_mode` session or transaction, see
    docs/deploy.md); yields where it listens."""
    exe = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(exe):
        raise PostgresUnavailable("pgbouncer not found (apt-get install pgbouncer)")
    folder.mkdir(parents=True, exist_ok=True)
    _own(folder)
    port = free_port()
    (folder / "userlist.txt").write_text(f'"{pg.user}" ""\n')
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\n* = host={pg.host} port={pg.port}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'userlist.txt'}\npool_mode = {pool_mode}\n"
        "max_client_conn = 500\ndefault_pool_size = 40\nserver_reset_query = DISCARD ALL\n"
        f"logfile = {folder / 'pgbouncer.log'}\nignore_startup_parameters = extra_float_digits,options\n"
        # Dagster connects per statement: a log line per connection would be most of the log.
        "log_connections = 0\nlog_disconnections = 0\n"
    )
    for path in folder.iterdir():
        _own(path)
    # Its log goes to the logfile: a pipe nobody reads would fill and block it mid-run.
    proc = subprocess.Popen(_as_owner([exe, "-q", str(ini)]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port(port, timeout=20):
            proc.kill()
            log = folder / "pgbouncer.log"
            raise PostgresUnavailable(f"pgbouncer did not start: {log.read_text()[-1000:] if log.exists() else ''}")
        yield Postgres("127.0.0.1", port, pg.db, pg.user)
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A running PostgreSQL for the session (database `dagster`, user `agent_health`)."""
    folder = Path(tempfile.mkdtemp(prefix="ah-postgres-"))
    try:
        with running_postgres(folder) as pg:
            yield pg
    except PostgresUnavailable as exc:
        skip_or_fail(str(exc))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pgbouncer(postgres: Postgres) -> Iterator[Postgres]:
    """PgBouncer in front of the session's PostgreSQL (same database and user)."""
    folder = Path(tempfile.mkdtemp(prefix="ah-pgbouncer-"))
    try:
        with running_pgbouncer(postgres, folder) as bouncer:
            yield bouncer
    except PostgresUnavailable as exc:
        skip_or_fail(str(exc))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(pg: Postgres, name: str) -> Postgres:
    """A new empty database on the same server (one Dagster instance per test)."""
    _run([_bin("createdb"), "-h", pg.host, "-p", str(pg.port), "-U", pg.user, name], f"createdb {name}")
    return Postgres(pg.host, pg.port, name, pg.user)
