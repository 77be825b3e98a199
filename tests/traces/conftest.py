"""The trace tests' OpenSearch node is the session-wide one of tests/support/opensearch.py
(fixture `opensearch_url`), shared with the store tests."""
