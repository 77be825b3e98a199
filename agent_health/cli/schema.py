"""`agent-health schema [report|result|run|comparison] [-o FILE]`: the published JSON Schema of
what agent-health writes, generated from the pydantic models.

The published copies live in `agent_health/schemas/<name>.v<schema version>.schema.json`; a test
fails when the models change and they were not regenerated (`agent-health schema --update`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

import agent_health.analysis as analysis
from agent_health.files import write_atomic
from agent_health.model import SCHEMA_VERSION, EvalRun, RunReport, TestResult

PUBLISHED = Path(__file__).resolve().parents[1] / "schemas"
NAMES = ("report", "result", "run", "comparison")


def _model(name: str) -> Any:
    return {"report": RunReport, "result": TestResult, "run": EvalRun, "comparison": analysis.Comparison}[name]


def schema_for(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of what agent-health writes as `name`, versioned by the
    model's schema version."""
    body = _model(name).model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:agent-health:schema:{name}:v{SCHEMA_VERSION}",
        **body,
    }


def published_path(name: str) -> Path:
    return PUBLISHED / f"{name}.v{SCHEMA_VERSION}.schema.json"


def schema_text(name: str) -> str:
    return json.dumps(schema_for(name), indent=2, sort_keys=True) + "\n"


@click.command("schema")
@click.argument("name", type=click.Choice(NAMES), default="report", required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@click.option("--update", is_flag=True, help="Regenerate the published schemas in the package (maintainers).")
def schema_command(name: str, output: Path | None, update: bool) -> None:
    """Print the JSON Schema of a JSON report (default), a stored result, a run manifest or a comparison."""
    if update:
        for each in NAMES:
            write_atomic(published_path(each), schema_text(each))
            click.echo(f"wrote {published_path(each)}")
        return
    if output is not None:
        write_atomic(output, schema_text(name))
        click.echo(f"wrote {output}")
    else:
        click.echo(schema_text(name), nl=False)
