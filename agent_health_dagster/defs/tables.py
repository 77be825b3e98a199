"""The library's tables (agent_health.pipeline.tables) as Dagster table metadata."""

from __future__ import annotations

from dagster import MetadataValue, TableColumn, TableMetadataValue, TableRecord, TableSchema

from agent_health.pipeline import Table


def table_value(table: Table) -> TableMetadataValue:
    """A TableMetadataValue with the column schema; None cells are left out of their record."""
    schema = TableSchema(columns=[TableColumn(c.name, c.type, description=c.description) for c in table.columns])
    records = [TableRecord({k: v for k, v in row.items() if v is not None}) for row in table.rows]
    return MetadataValue.table(records=records, schema=schema)
