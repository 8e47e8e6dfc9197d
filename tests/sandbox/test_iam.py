"""IAM in the sandbox: the evaluator's rules (``emulator.iam``), what each request needs
(``emulator.iam_requests``), and the emulator's answers to a denied call (``emulator.iam_enforcer``), checked
through botocore against a real moto server so the error codes are the ones the kernel sees."""

from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from emulator import iam_enforcer
from emulator.iam import Caller, PolicyError, Principal, decide, matches, parse_policy
from emulator.iam_requests import Request, checks_for
from emulator.patches import message_move_tasks
from emulator.server import ACCOUNT_ID, REGION, free_port

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/worker-role"
CALLER = Caller("worker", f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/worker-role/worker", ACCOUNT_ID, ROLE)
CONTEXT = {"aws:securetransport": ["true"], "aws:principalarn": [ROLE]}
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/orders"


def principal(*statements: dict[str, Any]) -> Principal:
    return Principal(CALLER, parse_policy({"Statement": list(statements)}, "policy"))


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


QUEUE = "arn:aws:sqs:us-east-1:123456789012:q"


def queue_policy(effect: str, principal: dict[str, str], action: str, condition: dict[str, Any]) -> Any:
    statement = {"Effect": effect, "Principal": principal, "Action": action, "Resource": QUEUE}
    return parse_policy(
        {"Statement": [{**statement, "Condition": condition}]}, "queue-policy", resource_policy=True
    )


# -- the evaluator ---------------------------------------------------------------------------------------


def test_actions_match_case_insensitively_with_wildcards_and_resources_case_sensitively() -> None:
    assert matches("dynamodb:Get*", "DynamoDB:GetItem", ignore_case=True)
    assert not matches("dynamodb:Get*", "dynamodb:PutItem", ignore_case=True)
    assert matches("arn:aws:s3:::bucket/payments/*", "arn:aws:s3:::bucket/payments/op/1/request.json")
    assert not matches("arn:aws:s3:::bucket/payments/*", "arn:aws:s3:::bucket/Payments/x")
    assert matches("arn:aws:sqs:*:123:q?", "arn:aws:sqs:us-east-1:123:q1")


def test_a_grant_on_one_table_does_not_allow_another() -> None:
    p = principal(allow(["dynamodb:GetItem", "dynamodb:PutItem"], TABLE))
    assert decide(p, CALLER, "dynamodb:PutItem", TABLE, CONTEXT).allowed
    other = decide(p, CALLER, "dynamodb:PutItem", TABLE.replace("orders", "idempotency"), CONTEXT)
    assert not other.allowed
    assert other.reason == "because no identity-based policy allows the dynamodb:PutItem action"
    assert not decide(p, CALLER, "dynamodb:DeleteItem", TABLE, CONTEXT).allowed


def test_an_explicit_deny_wins_over_an_allow_and_resource_policies_deny_too() -> None:
    p = principal(allow("sqs:*", "*"))
    tls_only = queue_policy("Deny", {"AWS": "*"}, "sqs:*", {"Bool": {"aws:SecureTransport": "false"}})
    queue = QUEUE
    assert decide(p, CALLER, "sqs:SendMessage", queue, CONTEXT, tls_only).allowed
    plain_http = {**CONTEXT, "aws:securetransport": ["false"]}
    denied = decide(p, CALLER, "sqs:SendMessage", queue, plain_http, tls_only)
    assert not denied.allowed and denied.explicit_deny
    assert "explicit deny in a resource-based policy" in denied.reason


def test_a_resource_policy_alone_admits_the_service_it_names_under_its_conditions() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:events"
    from_topic = queue_policy(
        "Allow", {"Service": "sns.amazonaws.com"}, "sqs:SendMessage", {"ArnEquals": {"aws:SourceArn": topic}}
    )
    sns = Caller("sns.amazonaws.com", "sns.amazonaws.com", ACCOUNT_ID, service="sns.amazonaws.com")
    queue = "arn:aws:sqs:us-east-1:123456789012:q"
    ok = decide(None, sns, "sqs:SendMessage", queue, {"aws:sourcearn": [topic]}, from_topic)
    assert ok.allowed
    other_topic = {"aws:sourcearn": [topic + "-other"]}
    assert not decide(None, sns, "sqs:SendMessage", queue, other_topic, from_topic).allowed
    # The same policy does not admit a function's role.
    assert not decide(principal(), CALLER, "sqs:SendMessage", queue, CONTEXT, from_topic).allowed


def test_conditions_missing_keys_if_exists_and_negation() -> None:
    def with_condition(condition: dict[str, Any]) -> Principal:
        return principal(allow("s3:GetObject", "*", Condition=condition))

    get = ("s3:GetObject", "arn:aws:s3:::b/k")
    assert not decide(
        with_condition({"StringEquals": {"aws:SourceAccount": "1"}}), CALLER, *get, CONTEXT
    ).allowed
    assert decide(
        with_condition({"StringEqualsIfExists": {"aws:SourceAccount": "1"}}), CALLER, *get, CONTEXT
    ).allowed
    assert decide(
        with_condition({"StringNotEquals": {"aws:SourceAccount": "1"}}), CALLER, *get, CONTEXT
    ).allowed
    assert decide(with_condition({"Null": {"aws:SourceAccount": "true"}}), CALLER, *get, CONTEXT).allowed
    assert decide(
        with_condition({"StringLike": {"aws:PrincipalArn": "*:role/worker-*"}}), CALLER, *get, CONTEXT
    ).allowed


def test_a_condition_operator_the_sandbox_cannot_evaluate_fails_the_model_instead_of_guessing() -> None:
    with pytest.raises(PolicyError, match="DateGreaterThan is not evaluated"):
        principal(allow("s3:GetObject", "*", Condition={"DateGreaterThan": {"aws:CurrentTime": "2020"}}))


# -- what a request needs ----------------------------------------------------------------------------------


def _request(service: str, target: str = "", body: Any = None, **kwargs: Any) -> Request:
    headers = {"x-amz-target": target} if target else {}
    raw = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
    defaults: dict[str, Any] = {"method": "POST", "path": "/", "query": ""}
    defaults.update(kwargs)
    return Request(service=service, headers=headers, body=raw, region=REGION, account=ACCOUNT_ID, **defaults)


def test_transact_write_items_needs_the_per_item_action_on_each_table() -> None:
    body = {
        "TransactItems": [
            {"Put": {"TableName": "orders", "Item": {}}},
            {"Update": {"TableName": "idempotency", "Key": {}, "UpdateExpression": "SET a = :a"}},
            {"ConditionCheck": {"TableName": "inventory", "Key": {}, "ConditionExpression": "x"}},
            {"Delete": {"TableName": "orders", "Key": {}}},
        ]
    }
    checks = checks_for(_request("dynamodb", "DynamoDB_20120810.TransactWriteItems", body))
    assert [(c.action, c.resource.rsplit("/", 1)[-1]) for c in checks] == [
        ("dynamodb:PutItem", "orders"),
        ("dynamodb:UpdateItem", "idempotency"),
        ("dynamodb:ConditionCheckItem", "inventory"),
        ("dynamodb:DeleteItem", "orders"),
    ]


def test_queries_on_an_index_need_the_index_arn_and_streams_the_stream_arn() -> None:
    query = checks_for(
        _request("dynamodb", "DynamoDB_20120810.Query", {"TableName": "t", "IndexName": "byDeadline"})
    )
    assert query[0].resource.endswith(":table/t/index/byDeadline")
    stream = f"{TABLE}/stream/2026-12-01T00:00:00.000"
    records = checks_for(
        _request("dynamodb", "DynamoDBStreams_20120810.GetRecords", {"ShardIterator": f"{stream}|1|abc"})
    )
    assert records[0].action == "dynamodb:GetRecords" and records[0].resource == stream


def test_sqs_batches_sns_publishes_and_s3_objects_map_to_their_iam_actions() -> None:
    url = f"http://127.0.0.1:4566/{ACCOUNT_ID}/work"
    batch = checks_for(_request("sqs", "AmazonSQS.DeleteMessageBatch", {"QueueUrl": url, "Entries": []}))
    assert batch[0].action == "sqs:DeleteMessage" and batch[0].resource.endswith(f":{ACCOUNT_ID}:work")
    publish = checks_for(
        _request(
            "sns", body=b"Action=PublishBatch&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A1%3At&Version=2010-03-31"
        )
    )
    assert (publish[0].action, publish[0].resource) == ("sns:Publish", "arn:aws:sns:us-east-1:1:t")
    head = checks_for(_request("s3", method="HEAD", path="/bucket/payments/op/request.json"))
    assert (head[0].action, head[0].resource) == (
        "s3:GetObject",
        "arn:aws:s3:::bucket/payments/op/request.json",
    )
    listing = checks_for(_request("s3", method="GET", path="/bucket", query="list-type=2&prefix=x"))
    assert (listing[0].action, listing[0].resource) == ("s3:ListBucket", "arn:aws:s3:::bucket")


def test_a_dlq_redrive_needs_the_drain_actions_on_the_dlq_and_send_message_on_each_destination() -> None:
    dlq, source = (f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}" for name in ("work-dlq", "work"))
    drain = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]

    def needs(target: str, body: dict[str, Any], **resolvers: Any) -> list[tuple[str, str]]:
        checks = checks_for(_request("sqs", f"AmazonSQS.{target}", body), **resolvers)
        return [(c.action, c.resource) for c in checks]

    to = {"SourceArn": dlq, "DestinationArn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:elsewhere"}
    assert needs("StartMessageMoveTask", to) == [
        *((a, dlq) for a in ["sqs:StartMessageMoveTask", *drain]),
        ("sqs:SendMessage", to["DestinationArn"]),
    ]
    # Without a DestinationArn the messages go back to the DLQ's source queues.
    back = needs("StartMessageMoveTask", {"SourceArn": dlq}, dead_letter_sources=lambda arn: [source])
    assert back[-1] == ("sqs:SendMessage", source)
    handle = base64.b64encode(json.dumps({"taskId": "t-1", "sourceArn": dlq}).encode()).decode()
    assert needs("CancelMessageMoveTask", {"TaskHandle": handle}) == [
        (a, dlq) for a in ["sqs:CancelMessageMoveTask", *drain]
    ]
    assert needs("ListMessageMoveTasks", {"SourceArn": dlq}) == [
        ("sqs:ListMessageMoveTasks", dlq),
        ("sqs:GetQueueAttributes", dlq),
    ]


# -- the emulator's answers, through botocore ----------------------------------------------------------


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    remove = iam_enforcer.install()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).read()
    try:
        yield endpoint
    finally:
        server.stop()
        remove()


def _client(service: str, endpoint: str, key: str = "testing") -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


def _put_model(endpoint: str, statements: list[dict[str, Any]], resource_policies: dict[str, Any]) -> None:
    model = {
        "account": ACCOUNT_ID,
        "region": REGION,
        "functions": [
            {
                "function": "worker",
                "accessKeyId": "ASIAWORKER",
                "role": ROLE,
                "policies": [{"name": "worker/DefaultPolicy", "document": {"Statement": statements}}],
            }
        ],
        "resourcePolicies": resource_policies,
        "queues": [],
    }
    request = urllib.request.Request(
        f"{endpoint}/_relay/iam/model", data=json.dumps(model).encode(), method="PUT"
    )
    with urllib.request.urlopen(request) as response:
        assert json.loads(response.read())["functions"] == 1


def _code(call: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"], caught.value.response["Error"].get("Message", "")


def test_a_denied_call_fails_with_the_error_code_botocore_surfaces_on_aws(emulator: str) -> None:
    admin = {s: _client(s, emulator) for s in ("dynamodb", "sqs", "sns", "s3", "secretsmanager")}
    admin["dynamodb"].create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    url = admin["sqs"].create_queue(QueueName="work")["QueueUrl"]
    topic = admin["sns"].create_topic(Name="events")["TopicArn"]
    admin["s3"].create_bucket(Bucket="claims")
    admin["s3"].put_object(Bucket="claims", Key="payments/present", Body=b"{}")
    admin["secretsmanager"].create_secret(Name="api-key", SecretString="s3cr3t")
    _put_model(
        emulator,
        [allow("dynamodb:GetItem", TABLE), allow("s3:GetObject", "arn:aws:s3:::claims/payments/*")],
        {},
    )
    fn = {s: _client(s, emulator, "ASIAWORKER") for s in admin}

    fn["dynamodb"].get_item(TableName="orders", Key={"pk": {"S": "x"}})  # granted
    code, message = _code(lambda: fn["dynamodb"].put_item(TableName="orders", Item={"pk": {"S": "x"}}))
    assert code == "AccessDeniedException"
    assert message == (
        "User: arn:aws:sts::123456789012:assumed-role/worker-role/worker is not authorized to perform: "
        f"dynamodb:PutItem on resource: {TABLE} "
        "because no identity-based policy allows the dynamodb:PutItem action"
    )
    transact = [{"Put": {"TableName": "orders", "Item": {"pk": {"S": "y"}}}}]
    assert (
        _code(lambda: fn["dynamodb"].transact_write_items(TransactItems=transact))[0]
        == "AccessDeniedException"
    )
    assert _code(lambda: fn["sqs"].send_message(QueueUrl=url, MessageBody="{}"))[0] == "AccessDenied"
    assert _code(lambda: fn["sns"].publish(TopicArn=topic, Message="{}"))[0] == "AuthorizationError"
    assert (
        _code(lambda: fn["s3"].put_object(Bucket="claims", Key="payments/x", Body=b"{}"))[0] == "AccessDenied"
    )
    assert _code(lambda: fn["s3"].head_object(Bucket="claims", Key="other/x"))[0] == "403"
    assert (
        _code(lambda: fn["secretsmanager"].get_secret_value(SecretId="api-key"))[0] == "AccessDeniedException"
    )
    # Nothing denied reached moto: the item and the message were never written.
    assert "Item" not in admin["dynamodb"].get_item(TableName="orders", Key={"pk": {"S": "y"}})
    assert (
        admin["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]["ApproximateNumberOfMessages"]
        == "0"
    )

    # S3 answers 403, not 404, for a missing key to a caller that may not list the bucket.
    assert fn["s3"].get_object(Bucket="claims", Key="payments/present")["Body"].read() == b"{}"
    assert _code(lambda: fn["s3"].get_object(Bucket="claims", Key="payments/missing"))[0] == "AccessDenied"
    assert _code(lambda: admin["s3"].get_object(Bucket="claims", Key="payments/missing"))[0] == "NoSuchKey"

    denials = json.loads(urllib.request.urlopen(f"{emulator}/_relay/iam/denials").read())
    assert {(d["function"], d["action"]) for d in denials} >= {
        ("worker", "dynamodb:PutItem"),
        ("worker", "sqs:SendMessage"),
        ("worker", "sns:Publish"),
        ("worker", "s3:PutObject"),
        ("worker", "secretsmanager:GetSecretValue"),
        ("worker", "s3:ListBucket"),
    }


def test_the_usage_report_names_grants_never_used(emulator: str) -> None:
    admin = _client("dynamodb", emulator)
    admin.create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    _put_model(emulator, [allow(["dynamodb:GetItem", "dynamodb:DeleteItem"], TABLE)], {})
    _client("dynamodb", emulator, "ASIAWORKER").get_item(TableName="orders", Key={"pk": {"S": "x"}})
    report = json.loads(urllib.request.urlopen(f"{emulator}/_relay/iam/report").read())
    (worker,) = report["functions"]
    uses = {g["action"]: g["uses"] for g in worker["grants"]}
    assert uses == {"dynamodb:GetItem": 1, "dynamodb:DeleteItem": 0}
    assert worker["calls"] == {f"dynamodb:GetItem {TABLE}": 1}


def test_requests_signed_with_other_keys_are_not_restricted(emulator: str) -> None:
    _put_model(emulator, [], {})
    _client("sqs", emulator).create_queue(QueueName="operator-made")  # the sandbox's own glue, or an operator
    assert (
        _code(lambda: _client("sqs", emulator, "ASIAWORKER").create_queue(QueueName="x"))[0] == "AccessDenied"
    )


def test_a_function_may_redrive_only_a_dlq_and_to_a_destination_it_was_granted(emulator: str) -> None:
    remove = message_move_tasks.install()
    try:
        admin = _client("sqs", emulator)
        arns = {}
        for name in ("work", "other"):
            dlq_url = admin.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
            arns[f"{name}-dlq"] = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}-dlq"
            policy = json.dumps({"deadLetterTargetArn": arns[f"{name}-dlq"], "maxReceiveCount": 1})
            admin.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})
            arns[name] = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"
            admin.send_message(QueueUrl=dlq_url, MessageBody="{}")
        drain = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
        redrive = [
            "sqs:StartMessageMoveTask",
            "sqs:ListMessageMoveTasks",
            "sqs:CancelMessageMoveTask",
            *drain,
        ]
        _put_model(
            emulator,
            [
                allow(redrive, [arns["work-dlq"], arns["other-dlq"]]),
                allow("sqs:SendMessage", arns["work"]),  # not to "other"
            ],
            {},
        )
        fn = _client("sqs", emulator, "ASIAWORKER")

        fn.start_message_move_task(SourceArn=arns["work-dlq"], DestinationArn=arns["work"])
        assert (
            fn.list_message_move_tasks(SourceArn=arns["work-dlq"])["Results"][0]["SourceArn"]
            == arns["work-dlq"]
        )
        code, message = _code(
            lambda: fn.start_message_move_task(SourceArn=arns["other-dlq"], DestinationArn=arns["other"])
        )
        assert code == "AccessDenied"
        assert f"sqs:SendMessage on resource: {arns['other']}" in message
        # No DestinationArn: the send is to the DLQ's source queue, which is not granted either.
        assert _code(lambda: fn.start_message_move_task(SourceArn=arns["other-dlq"]))[0] == "AccessDenied"
        denials = json.loads(urllib.request.urlopen(f"{emulator}/_relay/iam/denials").read())
        assert [(d["action"], d["resource"]) for d in denials] == [("sqs:SendMessage", arns["other"])] * 2

        # Without the redrive grants on the DLQ (the model replaced), even listing is denied.
        _put_model(emulator, [allow("sqs:SendMessage", "*")], {})
        code, message = _code(lambda: fn.list_message_move_tasks(SourceArn=arns["work-dlq"]))
        assert code == "AccessDenied"
        assert f"sqs:ListMessageMoveTasks on resource: {arns['work-dlq']}" in message
        handle = admin.start_message_move_task(SourceArn=arns["other-dlq"], DestinationArn=arns["other"])
        code, message = _code(lambda: fn.cancel_message_move_task(TaskHandle=handle["TaskHandle"]))
        assert code == "AccessDenied"
        assert f"sqs:CancelMessageMoveTask on resource: {arns['other-dlq']}" in message
    finally:
        remove()


@pytest.mark.parametrize(
    ("service", "headers", "sent", "error_type"),
    [
        ("dynamodb", {"X-Amz-Target": "DynamoDB_20120810.GetItem"}, b"", "InternalServerError"),
        # The chaos run's flake: a PutEvents whose entries never arrived was read as one to the
        # default bus, and denied. The declared length says the body was cut.
        ("events", {"X-Amz-Target": "AWSEvents.PutEvents", "Content-Length": "120"}, b"", "InternalFailure"),
        ("sqs", {"X-Amz-Target": "AmazonSQS.SendMessage"}, b"", "InternalFailure"),
        ("secretsmanager", {"X-Amz-Target": "secretsmanager.GetSecretValue"}, b"", "InternalFailure"),
        ("sns", {"Content-Type": "application/x-www-form-urlencoded"}, b"", "InternalFailure"),
    ],
)
def test_a_request_whose_body_did_not_arrive_is_a_retryable_500_not_an_iam_denial(
    emulator: str, service: str, headers: dict[str, str], sent: bytes, error_type: str
) -> None:
    _put_model(emulator, [], {})
    before = len(json.loads(urllib.request.urlopen(f"{emulator}/_relay/iam/denials").read()))
    # A function's signed call whose body was lost on the way (chaos cuts connections).
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        **headers,
        "Authorization": "AWS4-HMAC-SHA256 "
        f"Credential=ASIAWORKER/20261204/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0",
    }
    url = urllib.parse.urlsplit(emulator)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    connection.putrequest("POST", "/")
    headers.setdefault("Content-Length", str(len(sent)))
    for key, value in headers.items():
        connection.putheader(key, value)
    connection.endheaders(sent)
    if int(headers["Content-Length"]) > len(sent):
        connection.sock.shutdown(1)  # the client's half of the connection is gone mid-body
    answer = connection.getresponse()
    text = answer.read().decode()
    connection.close()
    assert answer.status == 500
    assert error_type in text
    after = len(json.loads(urllib.request.urlopen(f"{emulator}/_relay/iam/denials").read()))
    assert after == before  # not an IAM question: nothing recorded as denied


# -- services acting as a role they were given (SNS's Firehose subscription role, a stream's role) -----


def _service_role_model(statements: list[dict[str, Any]], services: list[str]) -> dict[str, Any]:
    return {
        "account": ACCOUNT_ID,
        "region": REGION,
        "functions": [
            {"function": "worker", "accessKeyId": "ASIAWORKER", "role": ROLE, "policies": []},
        ],
        "resourcePolicies": {},
        "queues": [],
        "serviceRoles": [
            {
                "role": f"arn:aws:iam::{ACCOUNT_ID}:role/archive",
                "services": services,
                "policies": [{"name": "archive/DefaultPolicy", "document": {"Statement": statements}}],
            }
        ],
    }


def test_a_service_acts_as_its_role_only_if_the_role_trusts_it_and_allows_the_action(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = f"arn:aws:firehose:{REGION}:{ACCOUNT_ID}:deliverystream/analytics"
    role = f"arn:aws:iam::{ACCOUNT_ID}:role/archive"
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:order-events"
    put_record = {"Effect": "Allow", "Action": ["firehose:PutRecord"], "Resource": stream}
    monkeypatch.setattr(
        iam_enforcer,
        "STATE",
        iam_enforcer.load_model(_service_role_model([put_record], ["sns.amazonaws.com"])),
    )
    may = iam_enforcer.service_role_may
    assert may("sns.amazonaws.com", role, topic, "firehose:PutRecord", stream)
    # SNS writes with PutRecordBatch too: a role granting PutRecord alone is refused it.
    assert not may("sns.amazonaws.com", role, topic, "firehose:PutRecordBatch", stream)
    # The trust policy names SNS, not Firehose.
    assert not may("firehose.amazonaws.com", role, stream, "firehose:PutRecord", stream)
    # A role the templates did not make is not restricted.
    assert may(
        "sns.amazonaws.com", f"arn:aws:iam::{ACCOUNT_ID}:role/elsewhere", topic, "firehose:PutRecord", stream
    )
    reasons = [(d["action"], d["reason"]) for d in iam_enforcer.STATE.denials]
    assert reasons == [
        (
            "firehose:PutRecordBatch",
            "because no identity-based policy allows the firehose:PutRecordBatch action",
        ),
        (
            "firehose:PutRecord",
            "because the role's trust policy does not let firehose.amazonaws.com assume it",
        ),
    ]
    assert iam_enforcer.STATE.denials[0]["function"] == "sns.amazonaws.com as archive (order-events)"


def test_the_orders_stack_gives_sns_and_firehose_roles_they_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model the sandbox enforces holds the two service roles of the analytics archive, each trusted
    by its service alone; with it loaded, SNS may put into the stream and Firehose may write under
    events/ and errors/ of the bucket, and neither may do the other's part."""
    from tests.handlers.stack_world import plan

    model = plan("orders").topology.iam.to_json()
    by_service = {tuple(r["services"]): r for r in model["serviceRoles"]}
    sns_role, firehose_role = by_service[("sns.amazonaws.com",)], by_service[("firehose.amazonaws.com",)]
    (stream,) = {s["Resource"] for p in sns_role["policies"] for s in p["document"]["Statement"]}
    bucket = next(
        r.split("/", 1)[0]
        for p in firehose_role["policies"]
        for s in p["document"]["Statement"]
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if r.startswith("arn:aws:s3:::") and r.endswith("/events/*")
    )
    monkeypatch.setattr(iam_enforcer, "STATE", iam_enforcer.load_model(model))
    may = iam_enforcer.service_role_may
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:order-events"
    for action in ("firehose:PutRecord", "firehose:PutRecordBatch"):
        assert may("sns.amazonaws.com", sns_role["role"], topic, action, stream)
    assert may(
        "firehose.amazonaws.com", firehose_role["role"], stream, "s3:PutObject", f"{bucket}/events/dt=x/o"
    )
    assert may(
        "firehose.amazonaws.com", firehose_role["role"], stream, "s3:PutObject", f"{bucket}/errors/x/o"
    )
    assert not may(
        "firehose.amazonaws.com", firehose_role["role"], stream, "s3:DeleteObject", f"{bucket}/events/o"
    )
    assert not may(
        "firehose.amazonaws.com", firehose_role["role"], stream, "s3:PutObject", f"{bucket}/other/o"
    )
    assert not may("firehose.amazonaws.com", sns_role["role"], stream, "firehose:PutRecord", stream)
