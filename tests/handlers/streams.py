"""Reading a DynamoDB stream the way a Lambda stream mapping does: every shard from TRIM_HORIZON, then
on from the last sequence number seen.

It asks for a fresh iterator at each read (``AFTER_SEQUENCE_NUMBER``) instead of chaining
``NextShardIterator``: when a ``TransactWriteItems`` is cancelled, moto restores a deep copy of its
tables, stream shard included, and an iterator chained from before then keeps reading the discarded
shard -- every record written afterwards would silently never be seen.
"""

from __future__ import annotations

from typing import Any

from relay.envelope import Envelope


class StreamReader:
    def __init__(self, streams: Any, stream_arn: str) -> None:
        self.streams = streams
        self.stream_arn = stream_arn
        self._last: dict[str, str | None] = {}

    def _iterator(self, shard_id: str) -> str:
        last = self._last.get(shard_id)
        position: dict[str, str] = (
            {"ShardIteratorType": "TRIM_HORIZON"}
            if last is None
            else {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
        )
        return str(
            self.streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard_id, **position)[
                "ShardIterator"
            ]
        )

    def read(self) -> list[dict[str, Any]]:
        """Every record written since the previous read, in order per shard."""
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        records: list[dict[str, Any]] = []
        for shard in description["Shards"]:
            shard_id = shard["ShardId"]
            self._last.setdefault(shard_id, None)
            while True:
                iterator = self._iterator(shard_id)
                batch = self.streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
                if not batch:
                    break
                self._last[shard_id] = batch[-1]["dynamodb"]["SequenceNumber"]
                records.extend(batch)
        for record in records:
            record.setdefault("eventSourceARN", self.stream_arn)
        return records


def produced_events(streams: Any, stream_arn: str, pk: str) -> list[Envelope]:
    """Every event the writes of one entity (partition ``pk``) produced, in order -- what the stream
    publisher publishes, found the way it finds them: the events a write added to the item (in the
    stream record's NEW image and not in its OLD one), and the outbox rows inserted (the layout before).
    Read from the table's whole stream, so a step that produced an event twice shows it twice."""
    from relay.entity_events import new_events

    found: list[Envelope] = []
    for record in StreamReader(streams, stream_arn).read():
        data = record.get("dynamodb") or {}
        if (data.get("Keys") or {}).get("pk", {}).get("S") != pk:
            continue
        sk = str((data.get("Keys") or {}).get("sk", {}).get("S"))
        if sk.startswith("OUTBOX#"):
            if record.get("eventName") == "INSERT":
                found.append(Envelope.from_json(data["NewImage"]["envelope"]["S"]))
        else:
            found.extend(new_events(record))
    return found
