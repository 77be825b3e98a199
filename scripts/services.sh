#!/usr/bin/env bash
# Prepares the real services the tests start themselves, so test time stays predictable:
# the OpenSearch test node's jars come from Maven Central (cached in ~/.m2 after the first run).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v mvn >/dev/null && command -v java >/dev/null; then
  echo "==> fetching the OpenSearch test node (Maven)"
  mvn -q -B -f tests/services/opensearch/pom.xml compile dependency:copy-dependencies
else
  echo "==> java/mvn not found: OpenSearch tests will skip (or fail when AGENT_HEALTH_REQUIRE_SERVICES=1)"
fi
