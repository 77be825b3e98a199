"""The authoring API (test, expect, judge, fixtures)."""
