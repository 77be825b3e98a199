"""Loading eval files into tests with stable ids and content hashes."""

from agent_health.loader.discover import discover, load_tests, merge_loaded
from agent_health.loader.ids import slug, suite_name, test_id
from agent_health.loader.types import LoadedTest, LoadResult

__all__ = ["LoadResult", "LoadedTest", "discover", "load_tests", "merge_loaded", "slug", "suite_name", "test_id"]
