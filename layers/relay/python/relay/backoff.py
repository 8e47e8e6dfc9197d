"""Per-message exponential backoff for transient failures, via ChangeMessageVisibility.

Without it a failed message comes back after the queue's visibility timeout every time, so a sick
dependency is hammered at a fixed rate by every retry. Setting the failed message's visibility to
``min(base * 2^(receiveCount-1), cap) + jitter`` before reporting it failed spreads the retries out;
the jitter keeps messages that failed together from all coming back in the same second.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# ChangeMessageVisibility accepts 0..43200 seconds (12 hours).
MAX_VISIBILITY_SECONDS = 43_200
# Jitter is drawn from [0, JITTER_FRACTION * delay].
JITTER_FRACTION = 0.25

_rng = random.Random()


def backoff_delay(
    receive_count: int,
    *,
    base: float,
    cap: float,
    jitter: float | random.Random | None = None,
    retry_after: float | None = None,
) -> int:
    """Seconds the message should stay invisible before its next attempt.

    ``jitter``: a number of seconds to add (deterministic), a ``random.Random`` to draw
    ``uniform(0, 0.25 * delay)`` from (seed it in tests), or None for the module's generator.
    ``retry_after``: the dependency's own hint (e.g. Retry-After); the delay is never shorter.
    """
    attempt = max(int(receive_count), 1)
    # min() before the power would overflow for absurd receive counts; 2**60 is already > any cap.
    delay = min(base * (2 ** min(attempt - 1, 60)), cap)
    if isinstance(jitter, random.Random):
        extra = jitter.uniform(0, JITTER_FRACTION * delay)
    elif jitter is None:
        extra = _rng.uniform(0, JITTER_FRACTION * delay)
    else:
        extra = float(jitter)
    total = delay + extra
    if retry_after is not None:
        total = max(total, float(retry_after))
    return int(min(max(round(total), 0), MAX_VISIBILITY_SECONDS))


def apply_backoff(
    record: dict[str, Any],
    *,
    sqs_client: SQSClient,
    queue_url: str,
    base: float,
    cap: float,
    jitter: float | random.Random | None = None,
    retry_after: float | None = None,
    delay: int | None = None,
) -> int:
    """Set the record's visibility to its backoff delay (one ChangeMessageVisibility); return it.

    ``delay``: the delay already decided for this delivery (a ``relay.retry.RetryPlan``'s, which the
    handler may have recorded as its next attempt time) instead of a new draw of the jitter.
    """
    if delay is None:
        receive_count = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        delay = backoff_delay(receive_count, base=base, cap=cap, jitter=jitter, retry_after=retry_after)
    delay = int(min(max(delay, 0), MAX_VISIBILITY_SECONDS))
    sqs_client.change_message_visibility(
        QueueUrl=queue_url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=delay
    )
    return delay
