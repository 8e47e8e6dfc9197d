"""IAM is enforced in the sandbox: take one grant out of the synthesized policies and the e2e path that
needs it fails the way it fails on AWS. (Every other e2e test runs with the templates' policies and
fails on any denial: tests/e2e/conftest.py.)"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from emulator.iam import access_key_for
from emulator.iam_report import denials, enforce, fetch_report
from emulator.server import REGION
from local.sandbox import Sandbox
from tests.e2e.test_payments_e2e import payment, post_payment

pytestmark = [pytest.mark.e2e, pytest.mark.iam_denials]


@pytest.fixture
def api_without_operations_grant(sandbox: Sandbox) -> Iterator[tuple[str, str]]:
    """The payments API's role as synthesized, minus its statement on the operations table."""
    api = next(name for name in sandbox.topology.functions if "-payments-Api" in name)
    table = sandbox.topology.functions[api].environment["OPERATIONS_TABLE"]
    table_arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}"
    model = copy.deepcopy(sandbox.topology.iam)
    role = model.caller_roles[api].rsplit("/", 1)[-1]
    removed = 0
    for policy in model.role_policies[role]:
        statements = policy["document"]["Statement"]
        kept = [s for s in statements if table_arn not in str(s.get("Resource"))]
        removed += len(statements) - len(kept)
        policy["document"]["Statement"] = kept
    assert removed == 1, f"expected one statement granting {table_arn} to {api}, found {removed}"
    enforce(sandbox.endpoint, sandbox.topology, model)
    try:
        yield api, table_arn
    finally:
        enforce(sandbox.endpoint, sandbox.topology)


def test_a_keyed_payment_fails_with_access_denied_without_the_operations_grant(
    sandbox: Sandbox, api_without_operations_grant: tuple[str, str]
) -> None:
    api, table_arn = api_without_operations_grant
    before = len(denials(sandbox.endpoint))
    key = f"iam-{uuid.uuid4().hex}"
    response = post_payment(sandbox, payment(), key=key)
    # The kernel takes an AccessDenied for a configuration problem a deploy fixes (transient): the API
    # answers 503, retry later, and stores nothing.
    assert response.status_code == 503
    new = denials(sandbox.endpoint)[before:]
    assert [(d["function"], d["action"], d["resource"]) for d in new] == [
        (api, "dynamodb:PutItem", table_arn)
    ]
    # The same call with the function's own credentials: the error code botocore surfaces on AWS.
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=sandbox.endpoint,
        region_name=REGION,
        aws_access_key_id=access_key_for(api),
        aws_secret_access_key="local",
    )
    with pytest.raises(ClientError) as denied:
        ddb.get_item(
            TableName=table_arn.rsplit("/", 1)[-1],
            Key={"pk": {"S": f"OPERATION#{key}"}, "sk": {"S": "OPERATION"}},
        )
    assert denied.value.response["Error"]["Code"] == "AccessDeniedException"


def test_with_the_templates_grants_the_same_keyed_payment_is_accepted(sandbox: Sandbox) -> None:
    before = len(denials(sandbox.endpoint))
    assert post_payment(sandbox, payment(), key=f"iam-{uuid.uuid4().hex}").status_code == 202
    assert denials(sandbox.endpoint)[before:] == []


def test_the_schedule_puts_its_event_with_its_own_execution_role(sandbox: Sandbox) -> None:
    (schedule,) = [s for s in sandbox.topology.schedules if s.name.endswith("scores-hourly-snapshot")]
    # An hour no other test uses: the agents tests count the snapshots of the current one.
    for firing in sandbox.fire_schedule(schedule.name, "2020-01-01T00:00:00Z"):
        firing.wait()
    report = fetch_report(sandbox.endpoint)
    (entry,) = [f for f in report["functions"] if f["function"] == schedule.caller]
    assert entry["role"] == schedule.role_arn
    assert any(call.startswith("events:PutEvents arn:aws:events:") for call in entry["calls"])
