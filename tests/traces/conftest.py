"""The trace tests query the session's OpenSearch node: the `opensearch_url` fixture lives in
tests/conftest.py (the fault tests use the same node)."""
