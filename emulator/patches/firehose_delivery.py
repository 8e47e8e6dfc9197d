"""SNS delivers to an Amazon Data Firehose subscription; Firehose writes S3 objects as AWS does (patch 14).

moto's behaviour: ``Subscription.publish`` (moto/sns/models.py) delivers to ``sqs``, ``http(s)`` and
``lambda`` subscriptions and silently drops what it should deliver to a ``firehose`` one.
``FirehoseBackend.put_s3_records`` (moto/firehose/models.py) writes each put as one object under
``<prefix>YYYY/MM/DD/HH/`` whatever the prefix says: it evaluates no ``!{timestamp:...}`` expression,
ignores the ``AppendDelimiterToRecord`` processor, and writes without acting as the stream's role.

AWS's behaviour:
- SNS puts each message a Firehose subscription matches into the stream, as the subscription's role
  (``SubscriptionRoleArn``: it must trust ``sns.amazonaws.com`` and be allowed to put records into the
  stream, https://docs.aws.amazon.com/sns/latest/dg/prereqs-kinesis-data-firehose.html). With raw
  delivery the record is the message body alone
  (https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html). What SNS
  cannot deliver goes to the subscription's dead-letter queue, if it has one.
- Firehose concatenates a buffer's records without a delimiter unless the ``AppendDelimiterToRecord``
  processor is on (https://docs.aws.amazon.com/firehose/latest/dev/basic-deliver.html). It evaluates the
  prefix's ``!{timestamp:...}`` and ``!{firehose:...}`` expressions, and appends ``YYYY/MM/DD/HH/`` only to
  a prefix without any (https://docs.aws.amazon.com/firehose/latest/dev/s3-prefixes.html). It writes as
  the stream's role, which must be allowed ``s3:PutObject`` there.

The patch does all of that but buffering: each put is written at once, as one object (AWS holds
records up to the buffering hints, then writes one object for them all). The IAM questions go to
``ROLE_CHECK``, which ``emulator.iam_enforcer`` sets when it enforces; without it nothing is checked.
SNS's delivery and the records' 5 KB units are counted in ``emulator.tallies`` for the meter.

Upstream: yes. The SNS half is a silent drop, and the prefix expressions are documented behaviour every
Firehose-to-S3 user meets. ``docs/upstream/firehose_delivery.md``.

Patches: moto 5.2.5, ``Subscription.publish`` and ``FirehoseBackend.put_s3_records``.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from emulator import tallies

PATCHES = {"moto": "5.2.5"}

# (service, role ARN, source ARN, action, resource) -> allowed; set by emulator.iam_enforcer
ROLE_CHECK: Callable[[str, str, str, str, str], bool] | None = None

RECORD_UNIT_BYTES = 5120  # Firehose bills ingestion per record, rounded up to 5 KB
_EXPRESSION = re.compile(r"!\{(timestamp|firehose):([^}]*)\}")
# Java DateTimeFormatter letters Firehose accepts in !{timestamp:...}, as strftime
_DATE_LETTERS = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"))


def _allowed(service: str, role: str, source: str, action: str, resource: str) -> bool:
    check = ROLE_CHECK
    return check is None or check(service, role, source, action, resource)


def evaluate_prefix(prefix: str, now: datetime, *, error_output_type: str = "") -> str:
    """The prefix Firehose writes under at ``now`` (UTC): its expressions evaluated, or ``YYYY/MM/DD/HH/``
    appended when it has none."""

    def value(match: re.Match[str]) -> str:
        namespace, name = match.group(1), match.group(2)
        if namespace == "timestamp":
            pattern = name
            for java, strf in _DATE_LETTERS:
                pattern = pattern.replace(java, strf)
            return now.strftime(pattern)
        if name == "random-string":
            return uuid.uuid4().hex[:11]
        if name == "error-output-type":
            return error_output_type
        raise ValueError(f"unknown Firehose prefix expression !{{firehose:{name}}}")

    if _EXPRESSION.search(prefix):
        return _EXPRESSION.sub(value, prefix)
    return f"{prefix}{now.strftime('%Y/%m/%d/%H')}/"


def _delimiter(destination: dict[str, Any]) -> bytes:
    processing = destination.get("ProcessingConfiguration") or {}
    if str(processing.get("Enabled", "false")).lower() != "true":
        return b""
    for processor in processing.get("Processors", []):
        if processor.get("Type") == "AppendDelimiterToRecord":
            params = {
                str(p["ParameterName"]): str(p["ParameterValue"]) for p in processor.get("Parameters", [])
            }
            return params.get("Delimiter", "\\n").encode().decode("unicode_escape").encode()
    return b""


def install() -> Callable[[], None]:
    """Install patch 14; returns a function that removes it."""
    from moto.core.utils import utcnow
    from moto.firehose.models import FirehoseBackend, firehose_backends
    from moto.s3.models import s3_backends
    from moto.sns.models import Subscription
    from moto.sqs.models import sqs_backends

    original_publish = Subscription.publish
    original_put = FirehoseBackend.put_s3_records

    def publish(self: Any, message: str, message_id: str, *args: Any, **kwargs: Any) -> Any:
        if self.protocol != "firehose":
            return original_publish(self, message, message_id, *args, **kwargs)
        names = ("subject", "message_attributes", "group_id", "deduplication_id", "message_structure")
        call = {**dict(zip(names, args, strict=False)), **kwargs}
        matcher = self._filter_policy_matcher
        if matcher is not None and not matcher.matches(call.get("message_attributes"), message):
            return None
        if call.get("message_structure") == "json":
            message = self._parse_message_structure(message, self.protocol)
        raw = str(self.attributes.get("RawMessageDelivery", "false")).lower() == "true"
        body = (
            message
            if raw
            else json.dumps(
                self.get_post_data(
                    message,
                    message_id,
                    call.get("subject"),
                    message_attributes=call.get("message_attributes"),
                )
            )
        )
        data = body.encode("utf-8")
        stream_arn, topic = str(self.endpoint), self.topic.arn
        role = str(self.attributes.get("SubscriptionRoleArn", ""))
        region, name = stream_arn.split(":")[3], stream_arn.rsplit("/", 1)[-1]
        backend = firehose_backends[self.account_id][region]
        # SNS writes with PutRecordBatch; the documented minimum is PutRecord: the role needs both.
        if name in backend.delivery_streams and all(
            _allowed("sns.amazonaws.com", role, topic, action, stream_arn)
            for action in ("firehose:PutRecord", "firehose:PutRecordBatch")
        ):
            backend.put_record_batch(name, [{"Data": data}])
            caller = f"glue:sns ({topic.rsplit(':', 1)[-1]})"
            tallies.add(caller, "sns", "Deliver to Firehose")
            units = max(1, math.ceil(len(data) / RECORD_UNIT_BYTES))
            tallies.add(caller, "firehose", "Ingest (5 KB units)", billed=float(units))
            tallies.add(caller, "firehose", "Record bytes", billed=float(len(data)))  # for the quota
            return None
        dlq = json.loads(self.attributes.get("RedrivePolicy") or "{}").get("deadLetterTargetArn")
        if dlq:
            sqs_backends[self.account_id][dlq.split(":")[3]].send_message(dlq.rsplit(":", 1)[-1], body)
        return None

    def put_s3_records(
        self: Any,
        delivery_stream_name: str,
        version_id: str,
        s3_destination: dict[str, Any],
        records: list[dict[str, bytes]],
    ) -> list[dict[str, str]]:
        stream = self.delivery_streams[delivery_stream_name]
        bucket = s3_destination["BucketARN"].split(":")[-1]
        now = utcnow()
        prefix = evaluate_prefix(s3_destination.get("Prefix", ""), now)
        key = (
            f"{prefix}{delivery_stream_name}-{version_id}-{now.strftime('%Y-%m-%d-%H-%M-%S')}-{uuid.uuid4()}"
        )
        delimiter = _delimiter(s3_destination)
        data = b"".join(r["Data"] + delimiter for r in records)
        role = str(s3_destination.get("RoleARN", ""))
        if _allowed(
            "firehose.amazonaws.com",
            role,
            stream.delivery_stream_arn,
            "s3:PutObject",
            f"arn:aws:s3:::{bucket}/{key}",
        ):
            s3_backends[self.account_id][self.partition].put_object(bucket, key, data)
        # Accepted either way, as on AWS: a write Firehose cannot make fails later, in its error log.
        return [{"RecordId": str(uuid.uuid4())} for _ in records]

    Subscription.publish = publish  # type: ignore[method-assign]
    FirehoseBackend.put_s3_records = put_s3_records  # type: ignore[method-assign]

    def remove() -> None:
        Subscription.publish = original_publish  # type: ignore[method-assign]
        FirehoseBackend.put_s3_records = original_put  # type: ignore[method-assign]

    return remove
