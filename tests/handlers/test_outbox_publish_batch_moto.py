"""The outbox publisher publishes a stream batch with SNS PublishBatch (10 entries, 256 KiB a
request), in order; a refused entry stops the batch there, and it and every later record are
reported for the stream's retry."""

from __future__ import annotations

import json
from typing import Any

from relay.envelope import Envelope
from relay.errors import DependencyUnavailable, PermanentError
from relay.outbox import OutboxSkipped, publish_outbox_batch, sns_batch_publisher
from tests.builders import ddb_stream_event, ddb_stream_record, envelope, item_insert
from tests.handlers.moto_env import Aws
from tests.handlers.test_outbox_claim_check_side_effects_moto import topic_with_queue


def _receive_all(aws: Aws) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := aws.sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        messages += batch
        aws.sqs.delete_message_batch(
            QueueUrl=aws.queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
        )
    return messages


def test_a_stream_batch_of_twelve_events_is_two_publish_batch_requests(aws: Aws) -> None:
    topic_arn = topic_with_queue(aws)
    envs = [envelope(payload={"n": n}) for n in range(12)]
    records = [item_insert(e, table=aws.table) for e in envs]
    calls: list[str] = []
    aws.sns.meta.events.register("before-call.sns.*", lambda model, **_: calls.append(model.name))

    response = publish_outbox_batch(
        ddb_stream_event(records), topic_arn=topic_arn, sns_client=aws.sns, ddb_client=aws.ddb
    )

    assert response == {"batchItemFailures": []}
    assert calls == ["PublishBatch", "PublishBatch"]
    bodies = [json.loads(json.loads(m["Body"])["Message"]) for m in _receive_all(aws)]
    assert sorted(b["payload"]["n"] for b in bodies) == list(range(12))


class _RefusesOne:
    """An SNS client whose PublishBatch refuses the entry with Id ``refused``."""

    def __init__(self, refused: str, *, sender_fault: bool = False) -> None:
        self.refused, self.sender_fault, self.requests = refused, sender_fault, 0

    def publish_batch(
        self, TopicArn: str, PublishBatchRequestEntries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        self.requests += 1
        ids = [e["Id"] for e in PublishBatchRequestEntries]
        failed = [
            {"Id": i, "Code": "InternalError", "Message": "try again", "SenderFault": self.sender_fault}
            for i in ids
            if i == self.refused
        ]
        return {"Successful": [{"Id": i} for i in ids if i != self.refused], "Failed": failed}


def _items(n: int) -> list[tuple[Envelope, dict[str, Any]]]:
    return [(envelope(payload={"n": i}), {}) for i in range(n)]


def test_a_refused_entry_stops_the_batch_there_and_what_follows_waits_in_order() -> None:
    client = _RefusesOne("1")

    results = sns_batch_publisher("arn:aws:sns:us-east-1:123456789012:t", client)(_items(4))  # type: ignore[arg-type]

    assert results[0] is None
    assert isinstance(results[1], DependencyUnavailable)  # a server fault: retried
    assert all(isinstance(r, OutboxSkipped) for r in results[2:])


def test_a_sender_fault_is_permanent() -> None:
    results = sns_batch_publisher(
        "arn:aws:sns:us-east-1:123456789012:t", _RefusesOne("0", sender_fault=True)
    )(_items(1))  # type: ignore[arg-type]
    assert isinstance(results[0], PermanentError)


def test_the_failed_record_and_every_later_one_are_reported(aws: Aws) -> None:
    envs = [envelope(payload={"n": n}) for n in range(4)]
    records = [item_insert(e, table=aws.table) for e in envs]

    response = publish_outbox_batch(
        ddb_stream_event(records),
        topic_arn="arn:aws:sns:us-east-1:123456789012:t",
        sns_client=_RefusesOne("2"),
        ddb_client=aws.ddb,  # type: ignore[arg-type]
    )

    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [
        r["dynamodb"]["SequenceNumber"] for r in records[2:]
    ]


def test_the_events_an_entity_write_added_are_published_and_an_ended_entity_leaves_the_index(
    aws: Aws,
) -> None:
    """One write per step (``relay.entity_events``): a stream record publishes the events in its NEW
    image and not in its OLD one -- nothing per event is marked -- and an entity that ended (it carries
    its TTL) is taken out of the deadline index once they are out; an open one is left alone."""
    from relay.ddb import deserialize_item, serialize_item
    from relay.entity_events import compact

    topic_arn = topic_with_queue(aws)
    earlier, ended, announced = (envelope(payload={"n": n}) for n in range(3))
    records = []
    for name, last, expires in (
        ("open", [earlier, ended], None),
        ("ended", [earlier, announced], 2_000_000_000),
    ):
        old = {"id": f"widget#{name}", "version": 2, "ev": [compact(earlier)], "dueShard": "0", "dueAt": 100}
        new = {**old, "version": 3, "ev": [compact(e) for e in last]}
        if expires is not None:
            new["expiresAt"] = expires
        aws.ddb.put_item(TableName=aws.table, Item=serialize_item(new))
        records.append(
            ddb_stream_record(
                "MODIFY",
                keys=serialize_item({"id": new["id"]}),
                old_image=serialize_item(old),
                new_image=serialize_item(new),
                table=aws.table,
            )
        )

    response = publish_outbox_batch(
        ddb_stream_event(records), topic_arn=topic_arn, sns_client=aws.sns, ddb_client=aws.ddb
    )

    assert response == {"batchItemFailures": []}
    bodies = [json.loads(json.loads(m["Body"])["Message"]) for m in _receive_all(aws)]
    assert sorted(b["eventId"] for b in bodies) == sorted([ended.event_id, announced.event_id])
    still_open = deserialize_item(aws.item("widget#open") or {})
    assert still_open["dueShard"] == "0" and still_open["version"] == 3, "an open entity is not written"
    settled = deserialize_item(aws.item("widget#ended") or {})
    assert "dueShard" not in settled and "dueAt" not in settled and settled["version"] == 3
