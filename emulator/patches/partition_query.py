"""A table Query reads its partition alone, not the whole table sorted (patch 12).

moto's behaviour: ``Table.query`` (moto/dynamodb/models/table.py) calls ``Table.all_items``, which
lists and sorts every item of the table, then keeps those of the asked partition: each Query of a
table costs O(n log n) in the table's size (0.5 s on a 7,763-item table), so a long run's reads, and
chaos's verdict, grew quadratic. An index Query lists every item sorted too, then sorts its matches
by the index and table keys again.

AWS's behaviour: performance only: AWS's behaviour is unchanged. The items are already held by
partition (``Table.items``): the patch hands ``Table.query`` that partition alone, and moto's own code
does the rest (range conditions, order, pages, limits, filters, projections) unchanged. An index Query
still reads every item (moto keeps no index), but unsorted: moto's own sort of the matches by the index
and table keys, a total order, decides the order. Scan keeps moto's path.

Upstream: yes. Query is DynamoDB's most common read and moto's cost grows with the table rather than
the partition; handing ``query`` the partition is a few lines in ``Table``.
``docs/upstream/partition_query.md``.

Patches: moto 5.2.5, ``Table.query`` and ``Table.all_items``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}

_PARTITION = threading.local()  # (table, hash key) while a table Query runs on this thread


def install() -> Callable[[], None]:
    """Install patch 12; returns a function that removes it."""
    import inspect

    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    signature = inspect.signature(original_query)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        index, hash_key = bound.arguments.get("index_name"), bound.arguments.get("hash_key")
        if not index and hash_key is None:
            return original_query(self, *args, **kwargs)
        _PARTITION.key = (self, None if index else hash_key)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _PARTITION.key = None

    def all_items(self: Any) -> Any:
        hint = getattr(_PARTITION, "key", None)
        if hint is None or hint[0] is not self:
            return original_all_items(self)
        if hint[1] is None:  # an index Query: every item, in any order
            if not self.range_key_attr:
                return list(self.items.values())
            return [item for partition in self.items.values() for item in partition.values()]
        if hint[1] not in self.items:  # a defaultdict: a lookup must not create the partition
            return []
        partition = self.items[hint[1]]
        # Unsorted: moto's Query sorts the partition by its range key itself.
        return list(partition.values()) if self.range_key_attr else [partition]

    def remove() -> None:
        Table.query, Table.all_items = original_query, original_all_items  # type: ignore[method-assign]

    Table.query, Table.all_items = query, all_items  # type: ignore[method-assign]
    return remove
