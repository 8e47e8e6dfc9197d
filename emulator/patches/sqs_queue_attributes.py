"""SQS receives and queue attributes without recomputing every attribute per message (patch 7).

moto's behaviour: moto's SQS gets slower with every queued message. ``SQSBackend.receive_message``
(moto/sqs/models.py) checks each message it returns against the retention period through
``is_message_valid_based_on_retention_period``, which calls ``get_queue_attributes`` and so computes
ALL the queue's attributes (``Queue.attributes``): three passes over every message in the queue, each
message's visibility (``Message.visible``, ``Message.delayed``) taking two datetime conversions
(``unix_time_millis``). ``get_queue_attributes`` itself computes them all once per requested name. With
a few hundred messages queued one ReceiveMessage took half a second: a backlog fed on itself.

AWS's behaviour: performance only: AWS's behaviour is unchanged. Visibility, delay and retention are
decided as moto decides them, and GetQueueAttributes answers the same values: the patch reads the
retention period directly, computes the attributes once per call, and tells visibility and delay from
``time.time()`` (what ``unix_time_millis`` computes through datetimes).

Upstream: yes. Every ReceiveMessage is quadratic in the queue's length in moto today, for any user with
more than a handful of messages queued; the fix is local and keeps every answer.
``docs/upstream/sqs_queue_attributes.md``.

Patches: moto 5.2.5, ``Message.visible``, ``Message.delayed``,
``SQSBackend.is_message_valid_based_on_retention_period`` and ``SQSBackend.get_queue_attributes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 7; returns a function that removes it."""
    import time

    from moto.sqs.exceptions import InvalidAttributeName
    from moto.sqs.models import Message, SQSBackend

    def visible(self: Any) -> bool:
        return bool(time.time() * 1000.0 > self.visible_at)

    def delayed(self: Any) -> bool:
        return bool(time.time() * 1000.0 < self.delayed_until)

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    def get_queue_attributes(self: Any, queue_name: str, attribute_names: list[str]) -> dict[str, Any]:
        queue = self.get_queue(queue_name)
        if not attribute_names:
            return {}
        valid = ["All", *queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES]
        invalid = next((name for name in attribute_names if name not in valid), None)
        if invalid or invalid == "":
            raise InvalidAttributeName(invalid)
        attributes: dict[str, Any] = queue.attributes  # computed once
        if "All" in attribute_names:
            return attributes
        return {n: attributes[n] for n in attribute_names if attributes.get(n) is not None}

    saved = (
        Message.visible,
        Message.delayed,
        SQSBackend.is_message_valid_based_on_retention_period,
        SQSBackend.get_queue_attributes,
    )

    def remove() -> None:
        (
            Message.visible,  # type: ignore[method-assign]
            Message.delayed,  # type: ignore[method-assign]
            SQSBackend.is_message_valid_based_on_retention_period,  # type: ignore[method-assign]
            SQSBackend.get_queue_attributes,  # type: ignore[method-assign]
        ) = saved

    Message.visible = property(visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(delayed)  # type: ignore[method-assign,assignment]
    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
    SQSBackend.get_queue_attributes = get_queue_attributes  # type: ignore[method-assign]
    return remove
