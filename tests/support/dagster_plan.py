"""What a run worker's machine sees before any run: a script (run with `python -c` in the worker's
environment) that registers the code location's partitions on `DagsterInstance.get()` and prints
one JSON line, {"problems": [...], "suites": {evaluate job: [test partitions]}}."""

PLAN = """
import json
from dagster import DagsterInstance
from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.headless import register
pipeline = build_pipeline()
with DagsterInstance.get() as instance:
    problems = register(instance, pipeline)
    print(json.dumps({"problems": problems, "suites": {
        s.names.job: instance.get_dynamic_partitions(s.names.tests_partitions) for s in pipeline.suites}}))
"""
