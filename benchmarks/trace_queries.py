"""The local span store's query evaluator at its limits (issue 24): the largest queries the
trace-query tool accepts, over one run's spans. Prints the seconds each takes.

- a wildcard of 13 stars over a 34-character attribute (a backtracking regex took minutes);
- a terms query of 65,536 values (OpenSearch's index.max_terms_count);
- a bool query of 1,024 should clauses (OpenSearch's max_clause_count);
- 4,096 clauses in all (the tool's own bound), in five bool queries.

Usage: python benchmarks/trace_queries.py [--spans 10000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def term(i: int) -> dict[str, Any]:
    return {"term": {"name": f"x{i}"}}


QUERIES: dict[str, dict[str, Any]] = {
    "wildcard, 13 stars": {"wildcard": {"attributes.route": "*" * 13 + "x"}},
    "terms, 65,536 values": {"terms": {"name": [f"x{i}" for i in range(65_536)]}},
    "bool, 1,024 should clauses": {"bool": {"should": [term(i) for i in range(1024)]}},
    "4,096 clauses in 5 bools": {"bool": {"must": [{"bool": {"should": [term(i) for i in range(1023)]}}] * 4}},
}


def main() -> None:
    from agent_health.traces import dsl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000, help="spans in the run searched (default 10000)")
    args = parser.parse_args()
    route = "/pay/refund/abcdefghijklmnopqrstuv"  # 34 characters
    spans = [{"name": f"s{i}", "attributes": {"route": route}} for i in range(args.spans)]
    for label, query in QUERIES.items():
        started = time.perf_counter()
        matches = dsl.compile_query(dsl.validate({"query": query})["query"])
        hits = sum(1 for span in spans if matches(span))
        print(f"{label:<28} {time.perf_counter() - started:7.3f} s over {len(spans)} spans ({hits} hits)")


if __name__ == "__main__":
    main()
