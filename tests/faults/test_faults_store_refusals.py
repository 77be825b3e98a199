"""A shared store that refuses: a missing S3 bucket was reported before the first test, then every
test ran (and spent) and nothing was stored; an OpenSearch refresh that failed (credentials
refused, no permission to refresh) was swallowed, so a search after it silently missed what was
just written. Now a store that cannot take the run's manifest stops the run before any test
(exit 2) unless `--no-store`."""

from __future__ import annotations

import json
import textwrap
import uuid

from tests.faults.conftest import cli

COUNTING_AGENT = """
def run(prompt):
    with open("calls.txt", "a") as fh:  # every call the agent gets, and so every one paid for
        fh.write("call\\n")
    return "The payment service cannot reach its database."
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "counted", "connector": "python", "settings": {"function": "counting_agent:run"},
             "versions": {"v1": {}}}],
    default_agent="counted@v1",
)
"""


def test_a_missing_bucket_stops_the_run_before_any_test(tmp_path, evals, s3_endpoint):
    """The bucket does not exist: every test ran (and its agent was paid) and nothing was stored."""
    (tmp_path / "counting_agent.py").write_text(textwrap.dedent(COUNTING_AGENT))
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    cases = "".join(f"  - name: outage {i}\n    prompt: Diagnose outage {i}.\n" for i in range(5))
    evals("outages.yaml", "tests:\n" + cases)
    missing = f"ah-missing-{uuid.uuid4().hex[:8]}"
    store = json.dumps({"type": "s3", "settings": {"bucket": missing, "endpoint_url": s3_endpoint}})
    proc = cli("run", "evals", "--no-judge", "--store", store, "--reporter", "json=report.json", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert not (tmp_path / "calls.txt").exists(), "the agent was called though nothing could be stored"
    assert f"s3://{missing}" in out and "NoSuchBucket" in out and "(the run manifest); no test was run" in out, out
    assert "--no-store" in out and "Traceback" not in out
    assert not (tmp_path / "report.json").exists()  # no report of a run that did not run
    # what the message offers: the same run without a store runs every test
    unstored = cli("run", "evals", "--no-judge", "--no-store", cwd=tmp_path)
    assert unstored.returncode == 0, unstored.stdout + unstored.stderr
    assert (tmp_path / "calls.txt").read_text().count("call") == 5
