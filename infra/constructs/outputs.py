"""The stack outputs a deployed stage is found by: ``python -m ops smoke`` reads them with CloudFormation
DescribeStacks (and the sandbox answers DescribeStacks with them resolved, ``emulator/cloudformation.py``).

Outputs only, never exports: an exported value cannot change while another stack imports it
(CloudFormation refuses the update), and nothing imports these; they are for people and tools.
The keys are the contract with ``ops/smoke.py`` (``OUTPUTS`` there): renaming one here breaks the suite.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Fn
from constructs import Construct

from infra.constructs.http_api import HttpApi
from infra.constructs.reliable_queue import ReliableQueue

WORK_QUEUES = "WorkQueueNames"


def api_url_output(scope: Construct, key: str, api: HttpApi, what: str) -> CfnOutput:
    """``<Service>ApiUrl``: the HTTP API's base URL (its ``$default`` stage, no trailing slash)."""
    return CfnOutput(
        scope, key, value=api.url, description=f"Base URL of the {what} (SigV4 for AWS_IAM routes)"
    )


def work_queues_output(scope: Construct, queues: Sequence[ReliableQueue]) -> CfnOutput:
    """``WorkQueueNames``: the stack's work queues, comma-separated; each has its DLQ and alarms."""
    return CfnOutput(
        scope,
        WORK_QUEUES,
        value=Fn.join(",", [q.queue.queue_name for q in queues]),
        description="The stack's work queues, comma-separated (each with its DLQ and alarms)",
    )
