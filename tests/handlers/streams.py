"""Reading a DynamoDB stream the way a Lambda stream mapping does: every shard from TRIM_HORIZON, then
on from the last sequence number seen.

It asks for a fresh iterator at each read (``AFTER_SEQUENCE_NUMBER``) instead of chaining
``NextShardIterator``: when a ``TransactWriteItems`` is cancelled, moto restores a deep copy of its
tables, stream shard included, and an iterator chained from before then keeps reading the discarded
shard -- every record written afterwards would silently never be seen.
"""

from __future__ import annotations

from typing import Any


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
