"""Explicit maintenance of the Dagster instance's agent versions:

    python -m agent_health_dagster.manage delete-version demo@v1 [--purge-results] [--dagster-home PATH]

The agent configuration is the source of truth for which versions run; a version removed from it
is retired (kept, with its results and history, marked retired on the leaderboard). Deleting its
partition is this explicit command; `--purge-results` also deletes its stored results."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dagster import DagsterInstance

from agent_health_dagster.defs.partitions import AGENT_VERSIONS
from agent_health_dagster.defs.resources import resource_from_env


def delete_version(instance: object, project: object, ref: str, purge_results: bool = False) -> tuple[bool, int]:
    """Delete agent version `ref` from `agent_versions` (and its stored results when asked).
    Returns (whether the partition existed, results deleted)."""
    existed = ref in instance.get_dynamic_partitions(AGENT_VERSIONS)  # type: ignore[attr-defined]
    if existed:
        instance.delete_dynamic_partition(AGENT_VERSIONS, ref)  # type: ignore[attr-defined]
    deleted = 0
    if purge_results:
        store = project.store  # type: ignore[attr-defined]
        for key in store.list(agent=ref):
            deleted += bool(store.delete(key))
    return existed, deleted


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_health_dagster.manage", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    delete = commands.add_parser("delete-version", help="Delete an agent version's partition (explicitly).")
    delete.add_argument("ref", help="Agent version, KEY@VERSION.")
    delete.add_argument("--purge-results", action="store_true", help="Also delete its stored results.")
    delete.add_argument("--dagster-home", default=os.environ.get("DAGSTER_HOME"), help="Dagster instance folder.")
    args = parser.parse_args(argv)

    if not args.dagster_home:
        print("agent-health: set --dagster-home or $DAGSTER_HOME (the instance to change)", file=sys.stderr)
        return 2
    project = resource_from_env().project()
    with DagsterInstance.from_config(args.dagster_home) as instance:
        existed, deleted = delete_version(instance, project, args.ref, args.purge_results)
    if not existed and not deleted:
        print(f"agent-health: no agent version {args.ref!r} in {args.dagster_home}", file=sys.stderr)
        return 2
    configured = args.ref in project.config.agent_refs()
    print(
        f"deleted agent version {args.ref}"
        + (f" and {deleted} stored result(s)" if args.purge_results else " (stored results kept)")
        + (
            f"; it is still in {project.config_file}, so the agent_versions sensor will register it again"
            if configured
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
