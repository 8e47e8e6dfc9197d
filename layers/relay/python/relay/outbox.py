"""The outbox in the item: the events a write puts into an entity item, published from its stream.

Publishing to SNS inside the request that changes state is a dual write: a crash between the two
loses the event or announces a change that never committed. Instead every write of an entity item
(``relay.entity_events``: one write per step) holds the events it produces, and a DynamoDB-stream
consumer (``publish_outbox_batch``) publishes the events a record's NEW image holds and its OLD one
does not. Nothing is marked per event: a crash after publishing publishes them again on the stream's
retry, and downstream duplicates are expected and harmless, because consumers dedupe on the stable
eventId. An entity that ended leaves the deadline index once its last events are out (``settle_item``).

An event can also go to an EventBridge bus (``BusRoute``: the event types a service's integration
partners hear there, as ``detail-type`` with the envelope as ``detail``). A record succeeds only after
BOTH publishes succeeded, so the bus carries the same guarantee: at least once, the eventId in the
detail. A failure on either retries both; the channel that had succeeded delivers a duplicate, which
its consumers deduplicate like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from relay import deadlines, entity_events, tracing
from relay.clients import AwsClients, default_client
from relay.ddb import apply_write, deserialize_item
from relay.envelope import Envelope
from relay.errors import DependencyUnavailable, PermanentError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_events.type_defs import PutEventsRequestEntryTypeDef
    from mypy_boto3_sns import SNSClient


# A service's own message attributes for an event, from the event and the item it came from (the
# entity item's NEW image): what a subscription filters on beyond eventType.
MessageAttributes = Callable[[Envelope, Mapping[str, Any]], Mapping[str, str]]


def sns_publisher(
    topic_arn: str, sns_client: SNSClient | None = None, attributes: MessageAttributes | None = None
) -> Callable[[Envelope, Mapping[str, Any]], None]:
    """Publish an envelope to SNS with the ``eventType`` (and ``correlationId``) message attributes
    that subscription filter policies match on, and the service's own (``attributes``)."""

    def publish(envelope: Envelope, row: Mapping[str, Any]) -> None:
        client = sns_client if sns_client is not None else default_client("sns")
        envelope = tracing.produced(envelope, topic_arn)
        params: dict[str, Any] = {
            "TopicArn": topic_arn,
            "Message": envelope.to_json(),
            "MessageAttributes": _sns_attributes(envelope, row, attributes),
        }
        if topic_arn.endswith(".fifo"):
            params["MessageGroupId"] = str(row.get("messageGroupId") or envelope.event_type)
            params["MessageDeduplicationId"] = envelope.event_id
        client.publish(**params)

    return publish


# PublishBatch: at most 10 entries and 256 KiB of messages and attributes a request (a little kept
# back for the attributes' own encoding). SNS bills each 64 KB chunk of a request as one request, so a
# batch of small events costs what one publish does.
PUBLISH_BATCH_ENTRIES = 10
PUBLISH_BATCH_BYTES = 250 * 1024


def _sns_attributes(
    envelope: Envelope, row: Mapping[str, Any], attributes: MessageAttributes | None = None
) -> dict[str, Any]:
    own = dict(attributes(envelope, row)) if attributes is not None else {}
    return {
        **{name: {"DataType": "String", "StringValue": value} for name, value in own.items()},
        "eventType": {"DataType": "String", "StringValue": envelope.event_type},
        "correlationId": {"DataType": "String", "StringValue": envelope.correlation_id},
    }


def sns_batch_publisher(
    topic_arn: str, sns_client: SNSClient | None = None, attributes: MessageAttributes | None = None
) -> Callable[[list[tuple[Envelope, Mapping[str, Any]]]], list[BaseException | None]]:
    """Publish envelopes IN ORDER with PublishBatch (the same attributes as ``sns_publisher``); returns,
    per envelope, None when SNS took it or why not. Stops at the first failure: what follows it is
    ``OutboxSkipped`` (kept for the retry, in order), even if SNS took it in the same request."""

    def publish(items: list[tuple[Envelope, Mapping[str, Any]]]) -> list[BaseException | None]:
        client = sns_client if sns_client is not None else default_client("sns")
        results: list[BaseException | None] = [None] * len(items)
        start = 0
        while start < len(items):
            end, size = start, 0
            while end < len(items) and end - start < PUBLISH_BATCH_ENTRIES:
                size += len(items[end][0].to_json().encode()) + 200
                if end > start and size > PUBLISH_BATCH_BYTES:
                    break
                end += 1
            entries = []
            for index in range(start, end):
                envelope, row = items[index]
                envelope = tracing.produced(envelope, topic_arn)
                entry: dict[str, Any] = {
                    "Id": str(index),
                    "Message": envelope.to_json(),
                    "MessageAttributes": _sns_attributes(envelope, row, attributes),
                }
                if topic_arn.endswith(".fifo"):
                    entry["MessageGroupId"] = str(row.get("messageGroupId") or envelope.event_type)
                    entry["MessageDeduplicationId"] = envelope.event_id
                entries.append(entry)
            try:
                answer = client.publish_batch(
                    TopicArn=topic_arn, PublishBatchRequestEntries=cast("Any", entries)
                )
            except Exception as exc:
                failed_at = start
                results[start] = exc
            else:
                refused = sorted(int(f["Id"]) for f in answer.get("Failed") or [])
                if not refused:
                    start = end
                    continue
                failed_at = refused[0]
                first = next(f for f in answer["Failed"] if int(f["Id"]) == failed_at)
                text = (
                    f"SNS refused event {items[failed_at][0].event_id} on {topic_arn}: "
                    f"{first.get('Code')}: {first.get('Message', '')}"
                )
                results[failed_at] = (
                    PermanentError(text) if first.get("SenderFault") else DependencyUnavailable(text)
                )
            for later in range(failed_at + 1, len(items)):
                results[later] = OutboxSkipped("an earlier record of this batch failed; retried in order")
            return results
        return results

    return publish


@dataclass(frozen=True)
class BusRoute:
    """Which outbox events also go to an EventBridge bus: ``event_types``, put on ``event_bus`` (name or
    ARN) with ``Source`` = ``source`` and ``DetailType`` = the eventType."""

    event_bus: str
    source: str
    event_types: frozenset[str]


# PutEvents answers 200 with a failed entry; these entry error codes are worth a retry (AWS documents
# InternalFailure and ThrottlingException as the transient ones), any other is the request's fault.
_TRANSIENT_ENTRY_ERRORS = frozenset({"InternalFailure", "ThrottlingException"})


class BusRefused(PermanentError):
    """The bus refused an event for a reason a retry will not change (malformed, too large, denied)."""


def bus_publisher(
    route: BusRoute, events_client: EventBridgeClient | None = None
) -> Callable[[Envelope, Mapping[str, Any]], None]:
    """Put an envelope on ``route.event_bus`` when its type is one of ``route.event_types``."""

    def publish(envelope: Envelope, row: Mapping[str, Any]) -> None:
        if envelope.event_type not in route.event_types:
            return
        client: EventBridgeClient = events_client if events_client is not None else default_client("events")
        envelope = tracing.produced(envelope, route.event_bus)
        entry: PutEventsRequestEntryTypeDef = {
            "Source": route.source,
            "DetailType": envelope.event_type,
            "Detail": envelope.to_json(),
            "EventBusName": route.event_bus,
            "Time": envelope.occurred_at,
        }
        answer = client.put_events(Entries=[entry])
        if not answer.get("FailedEntryCount"):
            return
        failed = (answer.get("Entries") or [{}])[0]
        code, message = failed.get("ErrorCode", "Unknown"), failed.get("ErrorMessage", "")
        text = (
            f"PutEvents refused event {envelope.event_id} ({envelope.event_type}) on {route.event_bus}: "
            f"{code}: {message}"
        )
        if code in _TRANSIENT_ENTRY_ERRORS:
            raise DependencyUnavailable(text)
        raise BusRefused(text)

    return publish


def publish_outbox_batch(
    stream_event: dict[str, Any],
    *,
    publish: Callable[[Envelope], None] | None = None,
    topic_arn: str | None = None,
    sns_client: SNSClient | None = None,
    ddb_client: DynamoDBClient | None = None,
    table_name: str | None = None,
    bus: BusRoute | None = None,
    events_client: EventBridgeClient | None = None,
    attributes: MessageAttributes | None = None,
) -> dict[str, Any]:
    """DynamoDB-stream consumer body; returns ``{"batchItemFailures": [{"itemIdentifier": seq}]}``.

    The events each record's write added to its entity item are published (to ``publish`` if given,
    else SNS ``topic_arn``), and to ``bus`` when their type is routed there; a record that adds none
    is ignored. The table an ended entity is settled in is ``table_name`` or the one in the record's
    eventSourceARN.

    Stream semantics: Lambda checkpoints at the LOWEST reported SequenceNumber and re-sends the
    shard from there, so everything after a failure is re-sent anyway. We therefore stop at the
    first failure and report it and every later record too: that keeps publication order and avoids
    publishing later events twice.
    """
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    if publish is None and topic_arn is None:
        raise ValueError("publish_outbox_batch needs publish= or topic_arn=")
    bus_publish = bus_publisher(bus, events_client) if bus is not None else None
    ddb = ddb_client
    failed = [False]
    # SNS first, for the whole batch, in order and batched (``sns_batch_publisher``); each record then
    # meets its own outcome below. ``publish=`` (tests, custom transports) publishes one by one.
    published: dict[str, BaseException | None] = {}
    if publish is None and topic_arn:
        rows = [
            (str((r.get("dynamodb") or {}).get("SequenceNumber")), envelope, row)
            for r in stream_event.get("Records", [])
            for envelope, row in _publishable(r, item=attributes is not None)
        ]
        outcomes = sns_batch_publisher(topic_arn, sns_client, attributes)([(e, row) for _, e, row in rows])
        for (sequence, _, _), outcome in zip(rows, outcomes, strict=True):
            if published.get(sequence) is None:
                published[sequence] = outcome

    def record_handler(record: Any) -> None:
        nonlocal ddb
        raw: dict[str, Any] = record.raw_event
        if failed[0]:
            raise OutboxSkipped("an earlier record of this batch failed; retried in order")
        try:
            found = _publishable(raw)
            if not found:
                return
            if publish is not None:
                for envelope, _row in found:
                    publish(envelope)
            else:
                outcome = published.get(str((raw.get("dynamodb") or {}).get("SequenceNumber")))
                if outcome is not None:
                    raise outcome
            if bus_publish is not None:
                for envelope, row in found:
                    bus_publish(envelope, row)
            if ddb is None:
                ddb = default_client("dynamodb")
            _settle(ddb, table_name or _table_from_stream_arn(raw), raw)
        except Exception:
            failed[0] = True
            raise

    processor = BatchProcessor(EventType.DynamoDBStreams)
    # Report failures instead of raising when every record failed: same retry, no misleading error.
    processor.raise_on_entire_batch_failure = False
    from relay.observability import logger

    response = process_partial_response(
        event=stream_event, record_handler=record_handler, processor=processor, context=None
    )
    if response.get("batchItemFailures"):
        logger().warning("outbox publish failures", extra={"failures": len(response["batchItemFailures"])})
    return dict(response)


def _publishable(raw: Mapping[str, Any], *, item: bool = False) -> list[tuple[Envelope, dict[str, Any]]]:
    """What a stream record asks to publish: the events a write added to an entity item
    (``relay.entity_events``: the item is its outbox).

    An event comes with its message group; with ``item``, with the whole item it came from (a
    service's own ``attributes`` read it), deserialized only then: once per record, where they publish."""
    events = entity_events.new_events(raw)
    if not events:
        return []
    image = (raw.get("dynamodb") or {}).get("NewImage") or {}
    if item:
        context = deserialize_item({k: v for k, v in image.items() if k != entity_events.EVENTS_ATTRIBUTE})
    else:
        group = entity_events.image_value(image, "messageGroupId")
        context = {"messageGroupId": group} if group else {}
    return [(event, context) for event in events]


def _settle(ddb: DynamoDBClient, table_name: str, raw: Mapping[str, Any]) -> None:
    """An entity that ended stays in the deadline index until its last events are out: now they are."""
    image = (raw.get("dynamodb") or {}).get("NewImage") or {}
    if entity_events.image_value(image, entity_events.ENDED_ATTRIBUTE) is None:
        return
    if entity_events.image_value(image, deadlines.SHARD_ATTRIBUTE) is None:
        return
    version = entity_events.image_value(image, "version")
    keys = deserialize_item(raw["dynamodb"]["Keys"])
    settle_item(ddb, table_name, keys, int(version or 0))


def settle_item(ddb: DynamoDBClient, table_name: str, keys: Mapping[str, Any], version: int) -> None:
    """Take an ended entity out of the deadline index (``entity_events.settle_write``); a no-op when
    it changed or is gone."""
    write = entity_events.settle_write(table_name, keys, deadlines.ATTRIBUTES, version)
    try:
        apply_write(write, ddb_client=ddb)
    except Exception as exc:
        if entity_events.is_settled_error(exc):
            return
        raise


class OutboxSkipped(Exception):
    """Not attempted because an earlier record of the batch failed (kept for ordering)."""


def _table_from_stream_arn(record: Mapping[str, Any]) -> str:
    # arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL
    arn = str(record.get("eventSourceARN", ""))
    try:
        return arn.split(":", 5)[5].split("/")[1]
    except IndexError:
        raise ValueError(
            f"cannot tell the outbox table from eventSourceARN {arn!r}; pass table_name="
        ) from None


def outbox_handler[W: AwsClients](
    wiring: Callable[[], W],
    *,
    topic_arn: Callable[[W], str],
    table_name: Callable[[W], str],
    bus: Callable[[W], BusRoute] | None = None,
    attributes: MessageAttributes | None = None,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler of a table's outbox publisher (the table stream's consumer): Powertools
    logging with the Lambda context and tracing (``relay.observability``), the function's wiring
    (checked at cold start), and ``publish_outbox_batch`` to ``topic_arn(wiring)`` (and ``bus(wiring)``)
    settling ended entities in ``table_name(wiring)``.

    The handler's subsegment is annotated with the correlation id its records' events share (one
    request's events, the usual batch). An annotation holds one value, so a batch of records from
    several requests is annotated with none rather than with one of them."""
    from relay.observability import annotate_correlation_id, inject_lambda_context, trace_handler

    @inject_lambda_context
    @trace_handler
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # What publish_outbox_batch publishes: outbox INSERTs and the events entity writes added.
        correlation_ids = {
            envelope.correlation_id
            for record in event.get("Records", [])
            for envelope, _row in _publishable(record)
        }
        if len(correlation_ids) == 1:
            annotate_correlation_id(correlation_ids.pop())
        wired = wiring()
        return publish_outbox_batch(
            event,
            topic_arn=topic_arn(wired),
            sns_client=wired.sns,
            ddb_client=wired.ddb,
            table_name=table_name(wired),
            bus=bus(wired) if bus is not None else None,
            events_client=wired.events if bus is not None else None,
            attributes=attributes,
        )

    return handler
