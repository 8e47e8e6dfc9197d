"""Reliable table: DynamoDB with the defaults every Relay table needs.

- on-demand billing (no throttling cliff when a backlog drains);
- point-in-time recovery;
- a TTL attribute (`expiresAt`, epoch seconds) so clean-up never depends on the happy path;
- a stream (new and old images) when the table carries an outbox;
- optionally the kernel's sparse deadline index (`relay.deadlines`: GSI `due` on `dueShard`/`dueAt`,
  projection KEYS_ONLY, so a step that changes an item in it costs the index nothing) for a sweeper to
  find overdue work without a scan, beside the legacy `by-deadline` (projection ALL) that items written
  before the one-write layout are still found in. CloudFormation adds or removes one GSI per table per
  update, so the legacy index goes in a later release, once it is empty;
- deletion protection, and the removal policy (retained in prod), from the stage config; a protected
  table is always retained: CloudFormation could not delete it, so DESTROY would only fail the stack's
  deletion.

`aws_dynamodb.Table`, not `TableV2`: TableV2 synthesizes `AWS::DynamoDB::GlobalTable`, which the local
emulator cannot create.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as ddb
from constructs import Construct

from infra.constructs.naming import Naming
from relay import deadlines

TTL_ATTRIBUTE = "expiresAt"


class ReliableTable(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        removal_policy: RemovalPolicy,
        deletion_protection: bool,
        partition_key: str = "pk",
        sort_key: str | None = "sk",
        stream: bool = False,
        deadline_index: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = ddb.Table(
            self,
            "Table",
            table_name=naming(name),
            partition_key=ddb.Attribute(name=partition_key, type=ddb.AttributeType.STRING),
            sort_key=ddb.Attribute(name=sort_key, type=ddb.AttributeType.STRING) if sort_key else None,
            billing_mode=ddb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            stream=ddb.StreamViewType.NEW_AND_OLD_IMAGES if stream else None,
            deletion_protection=deletion_protection,
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else removal_policy,
        )
        if deadline_index:
            # Sparse: only items carrying both attributes (open work) are in it. The index of the layout
            # before one write per step keeps its definition unchanged (CloudFormation cannot change a
            # GSI's projection in place); nothing writes or reads it since ``ops migrate`` emptied it,
            # and a later deploy removes it (one GSI change per deploy).
            self.table.add_global_secondary_index(
                index_name="by-deadline",
                partition_key=ddb.Attribute(name="deadlineShard", type=ddb.AttributeType.STRING),
                sort_key=ddb.Attribute(name="deadlineAt", type=ddb.AttributeType.NUMBER),
                projection_type=ddb.ProjectionType.ALL,
            )
            self.table.add_global_secondary_index(
                index_name=deadlines.INDEX_NAME,
                partition_key=ddb.Attribute(name=deadlines.SHARD_ATTRIBUTE, type=ddb.AttributeType.STRING),
                sort_key=ddb.Attribute(name=deadlines.AT_ATTRIBUTE, type=ddb.AttributeType.NUMBER),
                projection_type=ddb.ProjectionType.KEYS_ONLY,
            )
            table_id = Stack.of(self).get_logical_id(self.table.node.default_child)  # type: ignore[arg-type]
            Validations.of(Stack.of(self)).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions::AwsSolutions-IAM5[Resource::<{table_id}.Arn>/index/*]",
                    reason="CDK's table grants add this table's own indexes (table/<name>/index/*) once it "
                    "has one; the only indexes are the deadline indexes, which hold a subset of the items "
                    "the grantee may already read in the table itself.",
                )
            )


def idempotency_table(
    scope: Construct,
    construct_id: str = "Idempotency",
    *,
    naming: Naming,
    removal_policy: RemovalPolicy,
    deletion_protection: bool,
) -> ReliableTable:
    """The per-service table shared by the kernel's processed-event markers and Powertools idempotency
    records: partition key `id`, TTL `expiresAt` (the kernel contract)."""
    return ReliableTable(
        scope,
        construct_id,
        name="idempotency",
        naming=naming,
        removal_policy=removal_policy,
        deletion_protection=deletion_protection,
        partition_key="id",
        sort_key=None,
    )
