"""Agents built with real frameworks on their offline test models, as a team would write them: no
agent-health code in them. Each answers the payment scenario of `tests/connectors/test_connectors_frameworks.py`
the same way: it thinks, searches the payment service's logs, and names the error log line the
test's context gave it (so the test sees that the context reached the model)."""
