"""CloudFormation DescribeStacks for the stacks the sandbox provisioned (``emulator.cloudformation``), through
botocore against a moto server with the patch the emulator installs. moto's own CloudFormation holds none
of the sandbox's stacks (the provisioner creates resources through the service APIs), so without the
patch every DescribeStacks of a deployed stack answers "does not exist"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator import cloudformation
from emulator.cloudformation import StackDescription, StackOutput
from emulator.provision import Provisioner
from emulator.server import ACCOUNT_ID, REGION
from emulator.templates import Stack
from tests.sandbox.moto_server import moto_server


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server(cloudformation.install) as url:
        yield url


def cfn(endpoint: str, region: str = REGION) -> Any:
    return boto3.client(
        "cloudformation",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


def stack_id(name: str, region: str = REGION) -> str:
    return f"arn:aws:cloudformation:{region}:{ACCOUNT_ID}:stack/{name}/local"


def described(name: str, *outputs: StackOutput, region: str = REGION) -> StackDescription:
    return StackDescription(
        name=name,
        stack_id=stack_id(name, region),
        created="2026-05-01T10:00:00.000Z",
        outputs=outputs,
        parameters=(("BootstrapVersion", "/cdk-bootstrap/hnb659fds/version"),),
    )


def template() -> dict[str, Any]:
    """A queue and outputs of the three shapes CDK writes: a Ref, a GetAtt, a Join with pseudo
    parameters, one of them exported."""
    return {
        "Resources": {
            "WorkQueue1A2B": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "app-dev-work"}}
        },
        "Outputs": {
            "QueueUrl": {"Value": {"Ref": "WorkQueue1A2B"}, "Description": "where to send work"},
            "QueueArn": {
                "Value": {"Fn::GetAtt": ["WorkQueue1A2B", "Arn"]},
                "Export": {"Name": "app-dev:QueueArn"},
            },
            "ApiUrl": {
                "Value": {
                    "Fn::Join": [
                        "",
                        [
                            "https://abc123.execute-api.",
                            {"Ref": "AWS::Region"},
                            ".",
                            {"Ref": "AWS::URLSuffix"},
                        ],
                    ]
                }
            },
        },
        "Parameters": {
            "BootstrapVersion": {
                "Type": "AWS::SSM::Parameter::Value<String>",
                "Default": "/cdk-bootstrap/hnb659fds/version",
            }
        },
    }


def outputs_of(answer: dict[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in answer.get("Outputs", [])}


def test_describe_stacks_answers_a_provisioned_stack_with_its_outputs_resolved_as_cloudformation_does(
    endpoint: str, tmp_path: Path
) -> None:
    stack = Stack("app-dev-work", template(), tmp_path / "app-dev-work.template.json")
    topology = Provisioner(endpoint, tmp_path).provision([stack])
    assert cloudformation.publish(endpoint, topology.stacks) == 1

    (answer,) = cfn(endpoint).describe_stacks(StackName="app-dev-work")["Stacks"]

    queue_url = topology.queues["app-dev-work"]
    assert outputs_of(answer) == {
        "QueueUrl": queue_url,
        "QueueArn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:app-dev-work",
        "ApiUrl": f"https://abc123.execute-api.{REGION}.amazonaws.com",
    }
    by_key = {o["OutputKey"]: o for o in answer["Outputs"]}
    assert by_key["QueueArn"]["ExportName"] == "app-dev:QueueArn"
    assert by_key["QueueUrl"]["Description"] == "where to send work"
    assert "ExportName" not in by_key["QueueUrl"]
    assert answer["StackStatus"] == "CREATE_COMPLETE"
    assert answer["StackId"] == stack_id("app-dev-work")
    assert answer["Parameters"] == [
        {"ParameterKey": "BootstrapVersion", "ParameterValue": "/cdk-bootstrap/hnb659fds/version"}
    ]
    assert answer["CreationTime"].tzinfo is not None
    assert set(answer["Capabilities"]) == {"CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"}
    assert answer["EnableTerminationProtection"] is False
    assert answer["DriftInformation"] == {"StackDriftStatus": "NOT_CHECKED"}


def test_describe_stacks_by_stack_id_and_without_a_name(endpoint: str) -> None:
    cloudformation.publish(
        endpoint,
        [
            described("app-dev-core", StackOutput("BusName", "app-dev-bus")),
            described("app-dev-payments", StackOutput("ApiUrl", "https://p.example.com", "the API")),
        ],
    )
    client = cfn(endpoint)

    (by_id,) = client.describe_stacks(StackName=stack_id("app-dev-payments"))["Stacks"]
    assert by_id["StackName"] == "app-dev-payments"
    assert outputs_of(by_id) == {"ApiUrl": "https://p.example.com"}
    every = client.describe_stacks()["Stacks"]
    assert [s["StackName"] for s in every] == ["app-dev-core", "app-dev-payments"]
    assert "NextToken" not in client.describe_stacks()
    # The paginator (what a client of many stacks uses) reads the same single page.
    pages = list(client.get_paginator("describe_stacks").paginate())
    assert [s["StackName"] for p in pages for s in p["Stacks"]] == ["app-dev-core", "app-dev-payments"]


def test_an_unknown_stack_is_a_400_validation_error_as_on_aws(endpoint: str) -> None:
    cloudformation.publish(endpoint, [described("app-dev-core")])

    with pytest.raises(ClientError) as raised:
        cfn(endpoint).describe_stacks(StackName="app-nosuch-core")

    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Code"] == "ValidationError"
    assert error["Error"]["Message"] == "Stack with id app-nosuch-core does not exist"


def test_a_stack_is_found_only_in_its_own_region(endpoint: str) -> None:
    cloudformation.publish(endpoint, [described("app-dev-core")])

    with pytest.raises(ClientError) as raised:
        cfn(endpoint, "eu-west-1").describe_stacks(StackName="app-dev-core")

    assert raised.value.response["Error"]["Code"] == "ValidationError"
    assert cfn(endpoint, "eu-west-1").describe_stacks()["Stacks"] == []


def test_values_that_need_escaping_come_back_as_they_were(endpoint: str) -> None:
    value = 'a&b <c> "d"'
    cloudformation.publish(endpoint, [described("app-dev-odd", StackOutput("Odd", value, "x < y"))])

    (answer,) = cfn(endpoint).describe_stacks(StackName="app-dev-odd")["Stacks"]

    assert answer["Outputs"] == [{"OutputKey": "Odd", "OutputValue": value, "Description": "x < y"}]


def test_the_published_stacks_can_be_read_back(endpoint: str) -> None:
    stacks = [described("app-dev-core", StackOutput("BusName", "app-dev-bus", export_name="app-dev:Bus"))]
    cloudformation.publish(endpoint, stacks)

    assert cloudformation.published(endpoint) == stacks


def test_other_cloudformation_actions_are_left_to_moto(endpoint: str) -> None:
    cloudformation.publish(endpoint, [described("app-dev-core")])
    client = cfn(endpoint)
    body = json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}})

    client.create_stack(StackName="made-through-moto", TemplateBody=body)

    (made,) = client.describe_stacks(StackName="made-through-moto")["Stacks"]
    assert made["StackName"] == "made-through-moto"
    assert [s["StackName"] for s in client.list_stacks()["StackSummaries"]] == ["made-through-moto"]
