"""Data access for the points table -- the ONLY module that knows its attribute names and key shapes.

Points table (``POINTS_TABLE``; pk/sk), one partition per customer:

* the balance:   ``pk = CUSTOMER#<customerId>, sk = BALANCE`` -- ``balance`` (Number), ``updatedAt``
* one order:     ``pk = CUSTOMER#<customerId>, sk = ORDER#<orderId>`` -- its accrual (``accrued``,
  ``accruedAt``, ``accrualEventId``) and, once reversed, its reversal (``reversed``, ``reversedAt``,
  ``reversalEventId``). The ledger is these items, read with one Query.

Both writes of a change (the order item, the balance) commit in ONE transaction, each conditional on
what was read: the balance moves exactly by what the order item records, once. The order item is the
step's record: its accrual and reversal are each written once (conditional on being absent), and it
records the event it processed (``seen``, ``relay.entity_events``), so the same eventId with another
payload is a ``PayloadConflict``. No separate marker is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from relay import entity_events
from relay.ddb import BusinessWrite, OnConditionFailed, deserialize_item, serialize_item, update
from relay.entity_store import EntityStore
from relay.envelope import Envelope

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BALANCE_SK = "BALANCE"
ORDER_PREFIX = "ORDER#"


def customer_pk(customer_id: str) -> str:
    return f"CUSTOMER#{customer_id}"


def _recorded(cause: Envelope, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` plus the processed event: its id (``:e``) and ``seen`` (``:seen``)."""
    return {**values, ":e": cause.event_id, ":seen": {cause.event_id: entity_events.payload_hash(cause)}}


def balance_key(customer_id: str) -> dict[str, str]:
    return {"pk": customer_pk(customer_id), "sk": BALANCE_SK}


def order_entry_key(customer_id: str, order_id: str) -> dict[str, str]:
    return {"pk": customer_pk(customer_id), "sk": f"{ORDER_PREFIX}{order_id}"}


@dataclass(frozen=True)
class OrderPoints:
    """What one order did to a customer's points."""

    order_id: str
    accrued: int | None = None
    accrued_at: str | None = None
    accrual_event_id: str | None = None
    reversed: int | None = None
    reversed_at: str | None = None
    reversal_event_id: str | None = None
    seen: dict[str, str] | None = None  # the last event recorded -> its payload hash


def _order_points(item: Mapping[str, Any]) -> OrderPoints:
    def number(name: str) -> int | None:
        return int(item[name]) if item.get(name) is not None else None

    def text(name: str) -> str | None:
        return str(item[name]) if item.get(name) else None

    return OrderPoints(
        order_id=str(item["orderId"]),
        accrued=number("accrued"),
        accrued_at=text("accruedAt"),
        accrual_event_id=text("accrualEventId"),
        reversed=number("reversed"),
        reversed_at=text("reversedAt"),
        reversal_event_id=text("reversalEventId"),
        seen=dict(item.get(entity_events.SEEN_ATTRIBUTE) or {}),
    )


class PointsStore(EntityStore):
    """Balances and per-order accruals and reversals."""

    ENTITY = "customer"
    ID_ATTRIBUTE = "customerId"
    NEW_ONE = "a new accrual"

    def __init__(
        self, *, points_table: str, idempotency_table: str | None, ddb_client: DynamoDBClient
    ) -> None:
        super().__init__(table_name=points_table, idempotency_table=idempotency_table, ddb_client=ddb_client)

    def order_points(self, customer_id: str, order_id: str) -> OrderPoints | None:
        item = self.read(order_entry_key(customer_id, order_id))
        return _order_points(item) if item else None

    def account(self, customer_id: str, *, limit: int) -> tuple[int, list[OrderPoints], bool]:
        """(balance, the orders that moved it oldest key first, whether more exist) in one Query."""
        balance, more = 0, False
        entries: list[OrderPoints] = []
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": serialize_item({":pk": customer_pk(customer_id)}),
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.query(**params)
            for raw in page.get("Items", []):
                item = deserialize_item(raw)
                if item["sk"] == BALANCE_SK:
                    balance = int(item.get("balance") or 0)
                elif len(entries) < limit:
                    entries.append(_order_points(item))
                else:
                    more = True
            if "LastEvaluatedKey" not in page:
                return balance, entries, more
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def points_write(
        self,
        entry: Literal["accrual", "reversal"],
        customer_id: str,
        order_id: str,
        points: int,
        cause: Envelope,
        *,
        at: str,
        after_other: bool,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """Record the order's accrual or reversal of ``points``, once, conditional on the entry being
        the one read. ``after_other``: the other one is recorded already (their events travel
        unordered) -- a reversal then reverses what the accrual recorded, and an accrual is recorded
        with an equal reversal, the balance does not move; a reversal before its accrual records 0."""
        condition = "attribute_not_exists(#accruedAt) AND attribute_not_exists(#reversedAt)"
        if entry == "accrual":
            expression = "SET orderId = :o, accrued = :p, #accruedAt = :at, accrualEventId = :e, seen = :seen"
            if after_other:
                condition = "attribute_not_exists(#accruedAt) AND attribute_exists(#reversedAt)"
                expression += ", reversed = :p"
        else:
            expression = (
                "SET orderId = :o, reversed = :p, #reversedAt = :at, reversalEventId = :e, seen = :seen"
            )
            if after_other:
                condition = (
                    "attribute_exists(#accruedAt) AND accrued = :p AND attribute_not_exists(#reversedAt)"
                )
            else:
                points = 0
        return update(
            self.table_name,
            order_entry_key(customer_id, order_id),
            expression,
            condition,
            {"#accruedAt": "accruedAt", "#reversedAt": "reversedAt"},
            _recorded(cause, {":p": points, ":at": at, ":o": order_id}),
            on_condition_failed=on_condition_failed,
        )

    def balance_write(self, customer_id: str, delta: int, *, at: str) -> BusinessWrite:
        return update(
            self.table_name,
            balance_key(customer_id),
            "ADD balance :delta SET updatedAt = :at, customerId = :c",
            values={":delta": delta, ":at": at, ":c": customer_id},
        )
