"""YAML for eval files: PyYAML's safe loader with bounded alias expansion and nesting.

Aliases let a 1.6 KB document stand for a billion nodes ("billion laughs"): PyYAML shares the
aliased objects, but everything that walks the result (validation, hashing, JSON) expands them.
The composer below counts, for every node, how many nodes it stands for once aliases are
expanded, and rejects a document whose aliases add more than `MAX_ALIAS_NODES`, as soon as the
count passes it (before anything is constructed). Recursive aliases and nesting deeper than
`MAX_DEPTH` are rejected too (the latter would otherwise end in a RecursionError).

A mapping with the same key twice is rejected too (`DuplicateKey`, naming the key and its
second line): PyYAML keeps the last value silently, so a second `expected_tools:` would drop the
first one's tools. Keys are compared as the mapping would hold them (`1` and `01` are one key);
a merge key (`<<: *defaults`) is not a duplicate, and the keys it brings in may be overridden.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_ALIAS_NODES = 100_000  # nodes aliases may add: generous for `<<: *defaults` in thousands of cases
MAX_DEPTH = 100
_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKey(ComposerError):  # type: ignore[misc]  # PyYAML ships no stubs
    """One mapping holds a key twice; `problem` names the key, `problem_mark` is its second place."""


class BoundedSafeLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no stubs: SafeLoader is Any
    """A SafeLoader that refuses alias bombs, recursive aliases and absurd nesting."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded
        self._added = 0
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # the anchor's node is still being composed: it contains itself
                raise ComposerError(None, None, f"recursive alias *{event.anchor}", event.start_mark)
            self._added += size
            if self._added > MAX_ALIAS_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes (an alias bomb?); "
                    "write the values out or use fewer aliases",
                    event.start_mark,
                )
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1
        if isinstance(node, SequenceNode):
            size += sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, MappingNode):
            size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
            self._check_unique_keys(node)
        self._sizes[id(node)] = size
        return node

    def _check_unique_keys(self, node: MappingNode) -> None:
        """Raise DuplicateKey at the second place of a key `node` holds twice (its own keys: what a
        merge key brings in may be overridden). Scalar keys are constructed (once: the
        constructor keeps them) so that keys the mapping would hold as one are one."""
        seen: set[Any] = set()
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE:
                continue
            value = self.construct_object(key)
            try:
                duplicate = value in seen
                seen.add(value)
            except TypeError:  # not hashable: the constructor reports it
                continue
            if duplicate:
                raise DuplicateKey(
                    None,
                    None,
                    f"duplicate key {key.value!r} in one mapping (YAML would keep only its last value)",
                    key.start_mark,
                )


def load(text: str) -> tuple[Any, Node | None]:
    """The document and its root node (for line numbers); raises yaml.YAMLError."""
    loader = BoundedSafeLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def item_lines(root: Node | None, keys: tuple[str, ...]) -> list[int]:
    """1-based lines of the items of the root list, or of the list under one of `keys`."""
    target: Node | None = root
    if isinstance(root, MappingNode):
        target = next((v for k, v in root.value if getattr(k, "value", None) in keys), None)
    if isinstance(target, SequenceNode):
        return [item.start_mark.line + 1 for item in target.value]
    return []
