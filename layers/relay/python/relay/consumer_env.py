"""The environment variables of the kernel's queue consumer (``relay.consumer.ConsumerSettings``),
named once: the ``QueueConsumer`` construct sets them, the kernel reads them. Standard library only,
so the CDK app imports this module too."""

from __future__ import annotations

from typing import Final

QUEUE_URL: Final = "RELAY_QUEUE_URL"
"""The queue the function consumes (derived from the record's eventSourceARN when unset)."""
DLQ_URL: Final = "RELAY_DLQ_URL"
"""Its DLQ: where a permanent failure is parked with the reason. Required by ``queue_handler``."""
BACKOFF_BASE_SECONDS: Final = "RELAY_BACKOFF_BASE_SECONDS"
BACKOFF_CAP_SECONDS: Final = "RELAY_BACKOFF_CAP_SECONDS"
VISIBILITY_TIMEOUT_SECONDS: Final = "RELAY_VISIBILITY_TIMEOUT_SECONDS"
"""How far the heartbeat extends a long-running message each time (the queue's visibility timeout)."""
RETRY_BUDGET_SECONDS: Final = "RELAY_RETRY_BUDGET_SECONDS"
"""How long transient failures are retried (``relay.retry``): unset, a standard queue retries in place
until ``maxReceiveCount``; set, it re-sends the message with a delay until the budget is spent, then parks."""
PARKED_LEDGER_TABLE: Final = "RELAY_PARKED_LEDGER_TABLE"
"""The app's parked ledger (``relay.ledger``): every parking is recorded there too. Unset: not recorded."""
