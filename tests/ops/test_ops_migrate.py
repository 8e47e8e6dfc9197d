"""``ops migrate`` and ``ops doctor`` on what a migration cannot rewrite but must see drained: the
orders analytics queue left unsubscribed when the archive moved to Firehose (its writer drains it)."""

from __future__ import annotations

from typing import Any

from ops.app import App
from ops.doctor import Doctor
from ops.migrate import draining

WHAT = "messages in the orders analytics queue (unsubscribed since Firehose)"


def test_doctor_fails_while_the_unsubscribed_analytics_queue_holds_messages(payments: App) -> None:
    sqs: Any = payments.client("sqs")
    url = sqs.create_queue(QueueName=f"{payments.prefix}-orders-analytics")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="{}")

    assert draining(payments) == {WHAT: 1}
    (check,) = [c for c in Doctor(payments).run() if c.name.startswith(WHAT)]
    assert not check.ok and "ops status" in check.fix

    sqs.purge_queue(QueueUrl=url)
    assert draining(payments) == {WHAT: 0}
    (check,) = [c for c in Doctor(payments).run() if c.name.startswith(WHAT)]
    assert check.ok


def test_a_stage_without_the_queue_has_nothing_to_drain(payments: App) -> None:
    assert draining(payments) == {}
