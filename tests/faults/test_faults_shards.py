"""More shards than tests, as a fixed CI matrix makes them: the empty shards exited 2 ("no tests
found in shard"), so `merge` refused (a shard's report missing), and each shard held the budget on
its own while the merged report showed none (4 shards spent 3.1x a token budget, unseen). An
empty shard now runs nothing, says so, writes its reports and exits 0; the merge shows the shards'
spend against the sum of their limits and names each shard whose budget was reached
(docs/budgets.md, "Budgets and shards")."""

from __future__ import annotations

import json

from tests.core.test_docs_examples import block
from tests.support.cli import cli_in_process

THREE = """tests:
  - name: payments
    prompt: Diagnose why the payment service is failing.
  - name: orders
    prompt: Diagnose why the orders service is failing.
  - name: search
    prompt: Diagnose why the search service is failing.
"""


def test_a_matrix_with_more_shards_than_tests_merges_and_shows_the_budget(tmp_path, evals):
    evals("outages.yaml", THREE)
    for i in range(1, 5):
        shard = cli_in_process(
            "run", "evals", "--no-judge", "--shard", f"{i}/4", "--max-tokens", "1000",
            "--reporter", f"json=shard-{i}.json", cwd=tmp_path,
        )  # fmt: skip
        assert shard.returncode == 0, shard.stdout + shard.stderr  # each shard's one test passed; the 4th had none
    assert "shard 4/4 holds none of the 3 selected test(s): nothing to run" in shard.stderr, shard.stderr
    empty = json.loads((tmp_path / "shard-4.json").read_text())
    assert empty["shard"] == {"index": 4, "count": 4} and empty["results"] == []
    merged = cli_in_process("merge", *(f"shard-{i}.json" for i in range(1, 5)), "-o", "merged.json", cwd=tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    report = json.loads((tmp_path / "merged.json").read_text())
    assert sorted(r["name"] for r in report["results"]) == ["orders", "payments", "search"]
    budget = report["budget"]
    assert budget["shards"] == 4 and budget["max_tokens"] == 4000
    shards = [json.loads((tmp_path / f"shard-{i}.json").read_text())["budget"] for i in range(1, 5)]
    assert budget["tokens"] == sum(b["tokens"] for b in shards) > 1000  # together, past any one shard's limit
    line = next(line for line in merged.stderr.splitlines() if line.startswith("budget:"))
    assert line == block("budgets.md", "budget: tokens 4,057 of 4,000").strip(), merged.stderr


def test_a_selection_without_tests_still_exits_2_whatever_the_shard(tmp_path, evals):
    evals("outages.yaml", THREE)
    proc = cli_in_process("run", "evals", "--no-judge", "--grep", "nothing-matches", "--shard", "1/4", cwd=tmp_path)
    assert proc.returncode == 2 and "no tests found matching the filters" in proc.stdout + proc.stderr
