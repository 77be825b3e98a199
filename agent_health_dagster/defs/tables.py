"""The library's tables (agent_health.pipeline.tables) as Dagster table metadata."""

from __future__ import annotations

from dagster import MetadataValue, TableColumn, TableMetadataValue, TableRecord, TableSchema

from agent_health.pipeline import Table


def table_value(table: Table) -> TableMetadataValue:
    """A TableMetadataValue with the column schema. Every record has every column, a missing value
    as an empty (null) cell: Dagster requires all records of a table to have the same fields."""
    schema = TableSchema(columns=[TableColumn(c.name, c.type, description=c.description) for c in table.columns])
    names = [c.name for c in table.columns]
    records = [TableRecord({name: row.get(name) for name in names}) for row in table.rows]
    return MetadataValue.table(records=records, schema=schema)
