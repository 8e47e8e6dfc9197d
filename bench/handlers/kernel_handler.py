"""Sample kernel consumer (bench only): the shape of a real Relay queue consumer."""

from typing import Any

from relay.consumer import RecordContext, consume
from relay.ddb import update
from relay.envelope import Envelope
from relay.idempotency import commit_once
from relay.observability import logger

TABLE = "bench-table"


def apply_payment(envelope: Envelope, ctx: RecordContext) -> None:
    write = update(TABLE, {"id": f"account#{envelope.ids['accountId']}"}, "ADD balance :a", values={":a": 1})
    commit_once(envelope, [write], table_name=TABLE)


@logger().inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return consume(event, context, apply_payment)
