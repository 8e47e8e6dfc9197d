"""Private bucket: S3 with Relay's defaults, for claim checks and event archives.

- private (all public access blocked), SSE-S3, TLS-only bucket policy;
- server access logs to a companion log bucket (`defaults.BUCKETS`: 90 days);
- objects expire after `expiration_days`, and the tag `relay:min-expiration-days` (queue retention +
  the DLQ redrive window) lets the guard RELAY-S3-EXPIRY fail synth if they would expire sooner;
- both buckets follow the stage's removal policy: retained in prod (a claim check may still be needed by
  a parked message, and access logs are audit evidence). In a disposable stage CloudFormation deletes
  them only once empty: there is no auto-delete custom resource (it would add a Lambda function with
  broad S3 rights to every stack);
- grants go through `grant_prefix`, scoped to one key prefix with Put/Get only.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Tags, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs import defaults
from infra.guards import MIN_EXPIRATION_TAG


class PrivateBucket(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        expiration_days: int,
        purpose: str,
        queues: QueueSettings,
        removal_policy: RemovalPolicy,
    ) -> None:
        """`queues` (the stage's queue settings) gives the shortest safe expiry: a message can wait its
        retention in the queue, then its DLQ retention, before it is redriven and reads its object."""
        super().__init__(scope, construct_id)
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=Duration.days(defaults.BUCKETS.access_log_expiration_days))
            ],
            removal_policy=removal_policy,
        )
        Validations.of(access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-S1",
                reason=f"This is the access-log bucket of the {purpose} bucket; logging it to itself "
                "would loop.",
            )
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix=f"{purpose}/",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expiration_days))],
            removal_policy=removal_policy,
        )
        Tags.of(self.bucket).add(MIN_EXPIRATION_TAG, str(queues.retention_days + queues.dlq_retention_days))

    def grant_prefix(self, role: iam.IRole, prefix: str, *, read: bool, why: str) -> None:
        """Put (and optionally get) objects under `prefix` only — not grant_read_write, which would also
        allow deleting, listing and aborting uploads."""
        actions = ["s3:PutObject", *(["s3:GetObject"] if read else [])]
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=actions, resources=[self.bucket.arn_for_objects(f"{prefix}*")])
        )
        bucket_id = Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]", reason=why
            )
        )
