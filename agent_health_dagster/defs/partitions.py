"""Partitions: agent versions (dynamic, 'demo@v2'), and per suite its test ids (dynamic), crossed
into the (agent x test) partitions of results, metrics and insights; judge identities (dynamic,
'openai:gpt-4o-mini+contextual@judge-prompt-2~1a2b3c4d') of the calibration asset."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dagster import AssetKey, DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

from agent_health_dagster.defs.names import JUDGE_IDENTITIES

# The run tags that make one run cover a range of partitions (Dagster's single-run backfill
# shape, as its CLI's --partition-range writes them). Dagster exports no constant for them.
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

AGENT_DIM = "agent"
TEST_DIM = "test"

AGENT_VERSIONS = "agent_versions"
agent_versions = DynamicPartitionsDefinition(name=AGENT_VERSIONS)

# Per agent version, its effective settings and the judge settings as a data version: results
# depend on it, so changing either marks that version's results stale.
AGENT_SETTINGS_KEY = AssetKey(["agents", "settings"])
# The tag Dagster reads an observation's data version from (what ObserveResult(data_version=)
# writes); runless observations reported by the sensors carry it themselves.
DATA_VERSION_TAG = "dagster/data_version"


# Judge identities with labelled verdicts, added by the calibration sensor as they first appear
# (agent_health.pipeline.judge_partition_key); an identity no longer judging keeps its history.
judge_identities = DynamicPartitionsDefinition(name=JUDGE_IDENTITIES)


def tests_partitions(name: str) -> DynamicPartitionsDefinition:
    return DynamicPartitionsDefinition(name=name)


def results_partitions(
    tests: DynamicPartitionsDefinition, versions: DynamicPartitionsDefinition = agent_versions
) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition({AGENT_DIM: versions, TEST_DIM: tests})


def test_key(test_id: str) -> str:
    """A test's partition key within its suite's tests partitions: its id without the redundant
    `suite::` prefix ('rca/payments::checkout-latency' -> 'checkout-latency'), so keys read whole
    in the UI. Stored results stay keyed by the full test id."""
    return test_id.split("::", 1)[1] if "::" in test_id else test_id


def test_id_of(suite: str, key: str) -> str:
    """The test id of a partition key of `suite` (a key registered before keys dropped the prefix
    is already a whole id)."""
    return key if "::" in key else f"{suite}::{key}"


def multi_key(agent: str, test: str) -> MultiPartitionKey:
    return MultiPartitionKey({AGENT_DIM: agent, TEST_DIM: test})


def split_keys(keys: Iterable[str]) -> dict[str, list[str]]:
    """Partition keys of a run -> {agent version: [test ids]}, in run order."""
    out: dict[str, list[str]] = {}
    for key in keys:
        if isinstance(key, MultiPartitionKey):
            agent, test = key.keys_by_dimension[AGENT_DIM], key.keys_by_dimension[TEST_DIM]
        else:  # 'agent|test': dimension names sort agent before test
            agent, _, test = str(key).partition("|")
        out.setdefault(agent, []).append(test)
    return out


def range_tags(agents: Sequence[str], tests: Sequence[str]) -> dict[str, str]:
    """Run tags selecting the rectangle agents[0]..agents[-1] x tests[0]..tests[-1] (both in the
    order the dynamic partitions were added): one run, the single-run backfill shape."""
    return {
        RANGE_START_TAG: str(multi_key(agents[0], tests[0])),
        RANGE_END_TAG: str(multi_key(agents[-1], tests[-1])),
    }


def version_range_tags(agents: Sequence[str]) -> dict[str, str]:
    """Run tags selecting agents[0]..agents[-1] of `agent_versions` (registration order): one run
    of the per-version assets for a block of versions."""
    return {RANGE_START_TAG: agents[0], RANGE_END_TAG: agents[-1]}


PARTITION_TAG = "dagster/partition"  # a one-partition run's key (Dagster exports no constant for it)
AGENT_PARTITION_TAG = f"{PARTITION_TAG}/{AGENT_DIM}"  # the agent dimension of a multi-partition run


def run_agent_versions(tags: Mapping[str, str], registered: Sequence[str]) -> list[str]:
    """The agent versions a run covers, from its tags: a partition range (of (agent x test) keys
    or of versions, in registration order) or one partition."""
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if start and end:
        first, last = start.partition("|")[0], end.partition("|")[0]
        if first in registered and last in registered:
            i, j = registered.index(first), registered.index(last)
            return list(registered[min(i, j) : max(i, j) + 1])
        return [a for a in (first, last) if a]
    agent = tags.get(AGENT_PARTITION_TAG) or tags.get(PARTITION_TAG, "").partition("|")[0]
    return [agent] if agent else []


def contiguous_blocks(ordered: Sequence[str], wanted: Iterable[str]) -> list[list[str]]:
    """Split the `wanted` keys into runs that are contiguous in `ordered`, so a range covers
    exactly them."""
    want = set(wanted)
    blocks: list[list[str]] = []
    current: list[str] = []
    for key in ordered:
        if key in want:
            current.append(key)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def ordered_after(current: Sequence[str], add: Sequence[str], remove: Iterable[str]) -> list[str]:
    """Partition order once `add` is appended and `remove` is deleted (dynamic partitions keep
    insertion order)."""
    gone = set(remove)
    return [k for k in current if k not in gone] + [k for k in add if k not in set(current)]


def bounded_ranges(agents: Sequence[str], tests: Sequence[str], limit: int | None) -> list[tuple[list[str], list[str]]]:
    """Split the rectangle agents x tests (each contiguous in registration order) into rectangles
    of at most `limit` partitions, each one run's range (None: the whole rectangle in one run).
    Whole agent versions stay together while a version's tests fit in one run."""
    if not limit or len(agents) * len(tests) <= limit:
        return [(list(agents), list(tests))]
    if len(tests) <= limit:
        per = limit // len(tests)
        return [(list(agents[i : i + per]), list(tests)) for i in range(0, len(agents), per)]
    return [([agent], list(tests[i : i + limit])) for agent in agents for i in range(0, len(tests), limit)]
