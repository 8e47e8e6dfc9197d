"""Archive stream: an Amazon Data Firehose stream (Direct PUT) that writes a topic's events into a
private bucket as JSON Lines, the cheap way to keep every event for analytics.

SNS delivers each message to the stream (`FanoutTopic.archive_to`: raw delivery, the subscription DLQ
for what it could not deliver), Firehose buffers them and writes one object per buffer under
`<prefix>dt=YYYY-MM-DD/` (the arrival day, UTC: the Hive-style partition the per-event objects of the
earlier layout used, so one Athena table reads both). Failed deliveries land under `errors/` with the
reason, never dropped. Delivery is at least once: readers drop duplicates by eventId
(`orders.archive.read_archive`).

Defaults it owns (each has an infra test):
- server-side encryption with an AWS-owned key (no customer key to pay for or to grant, like SSE-SQS);
- a role of its own that may only write under the prefix and `errors/` of this one bucket (Firehose's
  documented S3 destination actions, no delete), and that only Firehose may assume;
- delivery errors logged to a log group kept as long as the stage keeps its logs.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.constructs.naming import Naming

ERRORS_PREFIX = "errors/"


class ArchiveStream(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        bucket: s3.IBucket,
        prefix: str,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        if not prefix.endswith("/"):
            raise ValueError(f"{self.node.path}: prefix {prefix!r} must end with '/'")
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "firehose.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
            description=f"Firehose {name}: writes its buffers under {prefix} and {ERRORS_PREFIX} only",
        )
        # Firehose's documented S3 destination actions, scoped to this bucket and its two prefixes
        # (https://docs.aws.amazon.com/firehose/latest/dev/controlling-access.html#using-iam-s3).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                resources=[bucket.bucket_arn],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
                resources=[bucket.arn_for_objects(f"{prefix}*"), bucket.arn_for_objects(f"{ERRORS_PREFIX}*")],
            )
        )
        log_group = logs.LogGroup(
            self, "DeliveryErrors", retention=log_retention, removal_policy=removal_policy
        )
        log_stream = logs.LogStream(self, "S3Delivery", log_group=log_group, removal_policy=removal_policy)
        log_group.grant_write(self.role)
        # The L1 resource: the L2 destination would also grant the role read-write on the whole bucket
        # (delete included), which is more than Firehose needs.
        cfn = firehose.CfnDeliveryStream
        self.cfn_stream = cfn(
            self,
            "Stream",
            delivery_stream_name=naming(name),
            delivery_stream_type="DirectPut",
            delivery_stream_encryption_configuration_input=cfn.DeliveryStreamEncryptionConfigurationInputProperty(
                key_type="AWS_OWNED_CMK"
            ),
            extended_s3_destination_configuration=cfn.ExtendedS3DestinationConfigurationProperty(
                bucket_arn=bucket.bucket_arn,
                role_arn=self.role.role_arn,
                prefix=f"{prefix}dt=!{{timestamp:yyyy-MM-dd}}/",
                error_output_prefix=f"{ERRORS_PREFIX}!{{firehose:error-output-type}}/dt=!{{timestamp:yyyy-MM-dd}}/",
                buffering_hints=cfn.BufferingHintsProperty(interval_in_seconds=300, size_in_m_bs=5),
                compression_format="UNCOMPRESSED",
                # One record a line (JSON Lines): Firehose adds no delimiter of its own, and SNS's raw
                # delivery sends the body alone.
                processing_configuration=cfn.ProcessingConfigurationProperty(
                    enabled=True, processors=[cfn.ProcessorProperty(type="AppendDelimiterToRecord")]
                ),
                cloud_watch_logging_options=cfn.CloudWatchLoggingOptionsProperty(
                    enabled=True,
                    log_group_name=log_group.log_group_name,
                    log_stream_name=log_stream.log_stream_name,
                ),
            ),
        )
        # Firehose checks at creation that it may write: the role's policy must exist first.
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.cfn_stream.node.add_dependency(policy)
        self.stream = firehose.DeliveryStream.from_delivery_stream_attributes(
            self,
            "Imported",
            delivery_stream_arn=self.cfn_stream.attr_arn,
            delivery_stream_name=self.cfn_stream.ref,
        )
        stack = Stack.of(self)
        bucket_id = stack.get_logical_id(bucket.node.default_child)  # type: ignore[arg-type]
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                reason="Firehose names each object itself (the stream, a time and a random suffix) under the "
                "dated prefix, so the grant is scoped to the prefix of this one bucket.",
            ),
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{ERRORS_PREFIX}*]",
                reason="Firehose writes what it could not deliver under errors/, with names of its own.",
            ),
        )
