"""Data access for the scores service -- the ONLY scores module that knows attribute names.

Scores table (``SCORES_TABLE``; pk ``pk`` S, sk ``sk`` S), one item per agent per hour:

    pk = AGENT#<agentId>, sk = HOUR#<snapshotHour>, kind = score-snapshot, agentId, snapshotHour,
    score (decimal string), verified, mismatched, unreachable, total, countedBefore (the cutoff),
    computedAt, eventId

``HOUR#`` + the canonical hour text (``scores.hours``) sorts in time order, so a time range is one
Query with ``sk BETWEEN``.

Verifications table (``VERIFICATIONS_TABLE``, owned by the reports service, read-only here): items
``pk = REPORT#<reportId>, sk = VERIFICATION`` with ``agentId``, ``status`` and ``checkedAt``
(ISO-8601 UTC with milliseconds). These names repeat ``reports.store``: the services are separate
code assets, and the names are a cross-service contract.

Idempotency table (``IDEMPOTENCY_TABLE``): the kernel's processed-event markers (``event#<id>``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay.ddb import deserialize_item, serialize_item
from relay.envelope import Envelope
from relay.errors import classify
from relay.idempotency import already_processed

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SNAPSHOT_KIND = "score-snapshot"
VERIFICATION_SK = "VERIFICATION"


def snapshot_key(agent_id: str, snapshot_hour: str) -> dict[str, str]:
    return {"pk": f"AGENT#{agent_id}", "sk": f"HOUR#{snapshot_hour}"}


@dataclass(frozen=True)
class Snapshot:
    agent_id: str
    snapshot_hour: str
    score: str
    verified: int
    mismatched: int
    unreachable: int
    total: int
    counted_before: str
    computed_at: str
    event_id: str

    def same_result(self, other: Snapshot) -> bool:
        """Whether two snapshots of one hour say the same thing (computedAt and eventId aside)."""
        return (self.score, self.verified, self.mismatched, self.unreachable, self.total) == (
            other.score,
            other.verified,
            other.mismatched,
            other.unreachable,
            other.total,
        )

    def to_item(self) -> dict[str, Any]:
        return {
            **snapshot_key(self.agent_id, self.snapshot_hour),
            "kind": SNAPSHOT_KIND,
            "agentId": self.agent_id,
            "snapshotHour": self.snapshot_hour,
            "score": self.score,
            "verified": self.verified,
            "mismatched": self.mismatched,
            "unreachable": self.unreachable,
            "total": self.total,
            "countedBefore": self.counted_before,
            "computedAt": self.computed_at,
            "eventId": self.event_id,
        }

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Snapshot:
        return cls(
            agent_id=str(item["agentId"]),
            snapshot_hour=str(item["snapshotHour"]),
            score=str(item["score"]),
            verified=int(item["verified"]),
            mismatched=int(item.get("mismatched", 0)),
            unreachable=int(item.get("unreachable", 0)),
            total=int(item["total"]),
            counted_before=str(item.get("countedBefore", "")),
            computed_at=str(item.get("computedAt", "")),
            event_id=str(item.get("eventId", "")),
        )


class ScoresStore:
    def __init__(
        self,
        *,
        ddb_client: DynamoDBClient,
        scores_table: str,
        verifications_table: str | None = None,
        idempotency_table: str | None = None,
    ) -> None:
        self.ddb = ddb_client
        self.scores_table = scores_table
        self.verifications_table = verifications_table
        self.idempotency_table = idempotency_table

    # verification records (reports' table, read-only) --------------------------------------------

    def verification_outcomes(self, *, checked_before: str) -> Iterator[tuple[str, str]]:
        """``(agentId, status)`` of every verification checked before ``checked_before``.

        A paginated Scan: a reference-size choice (thousands of reports; one Scan page reads 1 MB).
        At scale the worker would not rescan history every hour: it would keep running per-agent
        counters updated from the verifications table's stream (or Query a GSI keyed by checked hour,
        e.g. ``gsi1pk = CHECKED#<hour>``) and snapshot the counters as of the cutoff.
        """
        if not self.verifications_table:
            raise RuntimeError("ScoresStore was built without the verifications table")
        params: dict[str, Any] = {
            "TableName": self.verifications_table,
            "FilterExpression": "sk = :sk AND checkedAt < :before",
            "ProjectionExpression": "agentId, #status, checkedAt",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {":sk": {"S": VERIFICATION_SK}, ":before": {"S": checked_before}},
            # The snapshot is frozen once written: it must not miss a record committed just before.
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.scan(**params)
            for raw in page.get("Items", []):
                item = deserialize_item(raw)
                yield str(item["agentId"]), str(item["status"])
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            params["ExclusiveStartKey"] = last

    # snapshots ---------------------------------------------------------------------------------

    def put_snapshot_once(self, snapshot: Snapshot) -> Snapshot | None:
        """Write the snapshot unless the agent already has one for that hour.

        Returns None when written, else the stored snapshot (left as it is: first write wins).
        """
        try:
            self.ddb.put_item(
                TableName=self.scores_table,
                Item=serialize_item(snapshot.to_item()),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except Exception as exc:
            response = getattr(exc, "response", {}) or {}
            if response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise classify(exc) from exc
            old = response.get("Item")
            if old is None:
                old = self.ddb.get_item(
                    TableName=self.scores_table,
                    Key=serialize_item(snapshot_key(snapshot.agent_id, snapshot.snapshot_hour)),
                    ConsistentRead=True,
                ).get("Item")
            return Snapshot.from_item(deserialize_item(old or {}))

    def snapshots(
        self, agent_id: str, *, from_hour: str | None, to_hour: str | None, limit: int
    ) -> tuple[list[Snapshot], bool]:
        """The agent's snapshots in ``[from_hour, to_hour]`` (inclusive), oldest first, at most ``limit``;
        and whether there are more after them."""
        names = {"#pk": "pk", "#sk": "sk"}
        values: dict[str, Any] = {":pk": f"AGENT#{agent_id}"}
        condition = "#pk = :pk"
        if from_hour and to_hour:
            condition += " AND #sk BETWEEN :from AND :to"
            values.update({":from": f"HOUR#{from_hour}", ":to": f"HOUR#{to_hour}"})
        elif from_hour:
            condition += " AND #sk >= :from"
            values[":from"] = f"HOUR#{from_hour}"
        elif to_hour:
            condition += " AND #sk BETWEEN :first AND :to"
            values.update({":first": "HOUR#", ":to": f"HOUR#{to_hour}"})
        else:
            condition += " AND begins_with(#sk, :prefix)"
            values[":prefix"] = "HOUR#"
        params: dict[str, Any] = {
            "TableName": self.scores_table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": serialize_item(values),
            "ScanIndexForward": True,
            # One more than asked: tells whether there is a next page without a second request.
            "Limit": limit + 1,
        }
        snapshots: list[Snapshot] = []
        while len(snapshots) <= limit:
            page = self.ddb.query(**params)
            snapshots.extend(Snapshot.from_item(deserialize_item(i)) for i in page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if not last:
                break
            params["ExclusiveStartKey"] = last
        return snapshots[:limit], len(snapshots) > limit

    # job markers -------------------------------------------------------------------------------

    def already_processed(self, envelope: Envelope) -> bool:
        """Early exit for a rerun of a finished job (``relay.idempotency.already_processed``)."""
        if not self.idempotency_table:
            raise RuntimeError("ScoresStore was built without the idempotency table")
        return already_processed(envelope, table_name=self.idempotency_table, ddb_client=self.ddb)
