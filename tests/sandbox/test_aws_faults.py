"""AWS API faults in the emulator (``emulator.aws_faults``): a function's own calls get the throttling,
5xx and dropped-connection failures AWS gives, in each service's protocol, so botocore raises what
it raises on AWS and its standard retry mode retries them; a ``before`` fault applies nothing, an
``after`` fault applies the call and loses the reply. Checked through real boto3 clients signing as
functions against a real moto server with the emulator's installs."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionError, HTTPClientError
from botocore.retries.standard import ExponentialBackoff
from moto.server import ThreadedMotoServer

from emulator import aws_faults, iam_enforcer, request_meter
from emulator.server import ACCOUNT_ID, GLUE_AGENT, REGION, free_port

ORDERS = "orders-worker"
PAYMENTS = "payments-worker"
KEYS = {ORDERS: "ASIAORDERSWORKER", PAYMENTS: "ASIAPAYMENTSWORKR"}
# What botocore's standard retry mode retries on a dropped connection (``TransientRetryableChecker``).
CONNECTION_ERRORS = (ConnectionError, HTTPClientError)
_unique = itertools.count()


@dataclass
class World:
    endpoint: str
    admin: dict[str, Any]  # the sandbox's own clients ("testing" key): never faulted

    def fresh_queue(self) -> tuple[str, str]:
        name = f"work-{next(_unique)}"
        url = self.admin["sqs"].create_queue(QueueName=name)["QueueUrl"]
        return url, f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"

    def queued(self, url: str) -> int:
        attributes = self.admin["sqs"].get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _client(
    service: str, endpoint: str, key: str = "testing", *, attempts: int = 1, glue: str | None = None
) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key="testing",
        config=Config(
            retries={"mode": "standard", "total_max_attempts": attempts},  # attempts, not retries
            connect_timeout=2,
            read_timeout=5,
            user_agent_extra=f"{GLUE_AGENT}/{glue}" if glue else None,
        ),
    )


def _iam_model() -> dict[str, Any]:
    everything = {"Effect": "Allow", "Action": ["dynamodb:*", "sqs:*", "sns:*", "s3:*"], "Resource": "*"}
    return {
        "account": ACCOUNT_ID,
        "region": REGION,
        "functions": [
            {
                "function": name,
                "accessKeyId": key,
                "role": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}-role",
                "policies": [{"name": f"{name}/DefaultPolicy", "document": {"Statement": [everything]}}],
            }
            for name, key in KEYS.items()
        ],
        "resourcePolicies": {},
        "queues": [],
    }


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
        # The emulator's order (emulator.server._MOTO_MAIN): the injector last, outermost.
        removes = [iam_enforcer.install(), request_meter.install(), aws_faults.install()]
        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        endpoint = f"http://127.0.0.1:{port}"
        try:
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).read()
            admin = {s: _client(s, endpoint) for s in ("dynamodb", "sqs", "sns", "s3")}
            admin["dynamodb"].create_table(
                TableName="orders",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            admin["s3"].create_bucket(Bucket="claims")
            model = json.dumps(_iam_model()).encode()
            put = urllib.request.Request(f"{endpoint}/_relay/iam/model", data=model, method="PUT")
            urllib.request.urlopen(put).read()
            yield World(endpoint, admin)
        finally:
            server.stop()
            for remove in reversed(removes):
                remove()


@pytest.fixture(autouse=True)
def faults_off(world: World) -> Iterator[None]:
    aws_faults.clear(world.endpoint)
    yield
    aws_faults.clear(world.endpoint)


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """No sleep between botocore's attempts (the test stays fast; whether to retry is still botocore's
    decision); records each retry's base scale: 1 s when botocore classed the error as throttling."""
    scales: list[float] = []

    def delay_amount(self: ExponentialBackoff, context: Any) -> float:
        scales.append(self._get_base_scale(context))  # type: ignore[attr-defined]
        return 0.0

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", delay_amount)
    return scales


# -- one call per service, and how to see whether it took effect ---------------------------------------


def _dynamodb(world: World) -> tuple[Callable[[Any], None], Callable[[], bool]]:
    pk = f"order-{next(_unique)}"

    def call(client: Any) -> None:
        client.put_item(TableName="orders", Item={"pk": {"S": pk}})

    def applied() -> bool:
        return "Item" in world.admin["dynamodb"].get_item(TableName="orders", Key={"pk": {"S": pk}})

    return call, applied


def _sqs(world: World) -> tuple[Callable[[Any], None], Callable[[], bool]]:
    url, _ = world.fresh_queue()

    def call(client: Any) -> None:
        client.send_message(QueueUrl=url, MessageBody="{}")

    return call, lambda: world.queued(url) > 0


def _sns(world: World) -> tuple[Callable[[Any], None], Callable[[], bool]]:
    # A publish is seen through a subscribed queue: moto delivers to it as it publishes.
    topic = world.admin["sns"].create_topic(Name=f"events-{next(_unique)}")["TopicArn"]
    url, arn = world.fresh_queue()
    world.admin["sns"].subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)

    def call(client: Any) -> None:
        client.publish(TopicArn=topic, Message="{}")

    return call, lambda: world.queued(url) > 0


def _s3(world: World) -> tuple[Callable[[Any], None], Callable[[], bool]]:
    key = f"payments/{next(_unique)}.json"

    def call(client: Any) -> None:
        client.put_object(Bucket="claims", Key=key, Body=b'{"claim": "check"}')

    def applied() -> bool:
        listed = world.admin["s3"].list_objects_v2(Bucket="claims", Prefix=key)
        return bool(listed.get("KeyCount"))

    return call, applied


SCENARIOS = {
    "dynamodb": (
        "PutItem",
        ("ProvisionedThroughputExceededException", 400),
        ("InternalServerError", 500),
        _dynamodb,
    ),
    "sqs": ("SendMessage", ("RequestThrottled", 400), ("InternalFailure", 500), _sqs),
    "sns": ("Publish", ("Throttling", 400), ("InternalError", 500), _sns),
    "s3": ("PutObject", ("SlowDown", 503), ("InternalError", 500), _s3),
}


def _injected(world: World) -> list[tuple[str, str, str, str, str, int]]:
    return [
        (e["caller"], e["service"], e["action"], e["kind"], e["phase"], e["n"])
        for e in aws_faults.injected(world.endpoint)
    ]


def _metered(world: World, caller: str, service: str, action: str) -> int:
    with urllib.request.urlopen(f"{world.endpoint}{request_meter.PATH}") as response:
        entries = json.loads(response.read())
    return sum(
        int(e["requests"])
        for e in entries
        if (e["caller"], e["service"], e["action"]) == (caller, service, action)
    )


def _outcome(call: Callable[[], Any]) -> str:
    """What a call met: "ok", the error code botocore parsed, or "connection" (the connection was lost)."""
    try:
        call()
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    except CONNECTION_ERRORS:
        return "connection"
    return "ok"


# -- the tests -------------------------------------------------------------------------------------------


def test_faults_are_off_until_configured(world: World) -> None:
    with urllib.request.urlopen(f"{world.endpoint}{aws_faults.PATH}") as response:
        state = json.loads(response.read())
    assert state["config"]["rate"] == 0
    assert state["injected"] == []
    for service, (_, _, _, arrange) in SCENARIOS.items():
        call, applied = arrange(world)
        call(_client(service, world.endpoint, KEYS[ORDERS]))
        assert applied(), service
    assert _injected(world) == []


@pytest.mark.parametrize("kind", aws_faults.KINDS)
@pytest.mark.parametrize("service", list(SCENARIOS))
def test_each_fault_fails_the_call_as_aws_would_and_botocore_retries_it(
    world: World, service: str, kind: str, backoffs: list[float]
) -> None:
    action, throttle, internal, arrange = SCENARIOS[service]
    call, applied = arrange(world)
    aws_faults.configure(world.endpoint, rate=1.0, kinds=[kind])
    metered = _metered(world, ORDERS, service, action)

    # Retries off: the raw failure one attempt meets.
    if kind in ("timeout", "timeout-after"):
        with pytest.raises(CONNECTION_ERRORS):
            call(_client(service, world.endpoint, KEYS[ORDERS]))
    else:
        with pytest.raises(ClientError) as caught:
            call(_client(service, world.endpoint, KEYS[ORDERS]))
        code, status = throttle if kind == "throttle" else internal
        assert caught.value.response["Error"]["Code"] == code
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status

    phase = aws_faults.PHASES[kind]
    assert applied() is (phase == "after")
    # A before fault never reached moto (nor the meter inside it); an after fault was served.
    assert _metered(world, ORDERS, service, action) == metered + (phase == "after")
    assert _injected(world) == [(ORDERS, service, action, kind, phase, 1)]

    # Standard retries: botocore makes all three attempts, so it classed the failure retryable.
    with pytest.raises((ClientError, *CONNECTION_ERRORS)):
        call(_client(service, world.endpoint, KEYS[ORDERS], attempts=3))
    assert _injected(world) == [(ORDERS, service, action, kind, phase, 4)]
    throttling = [scale == 1 for scale in backoffs]
    assert throttling == [kind == "throttle"] * 2  # and as throttling only when it was a throttle

    # The emulator keeps answering, dropped connections or not.
    aws_faults.clear(world.endpoint)
    call(_client(service, world.endpoint, KEYS[ORDERS]))
    assert applied()


def test_standard_retries_absorb_occasional_faults_and_after_faults_duplicate_sends(
    world: World, backoffs: list[float]
) -> None:
    url, _ = world.fresh_queue()
    aws_faults.configure(world.endpoint, rate=0.3, seed=11, services=["sqs"])
    fn = _client("sqs", world.endpoint, KEYS[ORDERS], attempts=10)
    sends = 20
    for n in range(sends):
        fn.send_message(QueueUrl=url, MessageBody=json.dumps({"n": n}))  # every one succeeds
    injected = aws_faults.injected(world.endpoint)
    assert sum(e["n"] for e in injected) == len(backoffs) > 0
    lost_replies = sum(e["n"] for e in injected if e["phase"] == "after")
    assert lost_replies > 0  # seed 11 draws some: the assertion below must be able to fail
    # Each reply lost after the send was applied makes botocore's retry send the message again.
    assert world.queued(url) == sends + lost_replies


def test_the_glue_and_the_sandbox_own_calls_are_never_faulted(world: World) -> None:
    aws_faults.configure(world.endpoint, rate=1.0)
    url, _ = world.fresh_queue()
    glue = _client("sqs", world.endpoint, KEYS[ORDERS], glue="esm")
    glue.send_message(QueueUrl=url, MessageBody="{}")
    assert glue.receive_message(QueueUrl=url, WaitTimeSeconds=0)["Messages"]
    world.admin["sqs"].send_message(QueueUrl=url, MessageBody="{}")
    world.admin["dynamodb"].put_item(TableName="orders", Item={"pk": {"S": "by-the-sandbox"}})
    with urllib.request.urlopen(f"{world.endpoint}/moto-api/data.json") as response:
        assert response.status == 200
    assert _injected(world) == []
    # The same key without the glue's User-Agent is the function's own code: faulted.
    fn = _client("sqs", world.endpoint, KEYS[ORDERS])
    assert _outcome(lambda: fn.send_message(QueueUrl=url, MessageBody="{}")) != "ok"
    assert [(c, s, a, n) for c, s, a, _, _, n in _injected(world)] == [(ORDERS, "sqs", "SendMessage", 1)]


def test_callers_and_services_narrow_who_gets_faults(world: World) -> None:
    aws_faults.configure(world.endpoint, rate=1.0, kinds=["throttle"], callers=["payments"], services=["sqs"])
    url, _ = world.fresh_queue()
    _client("sqs", world.endpoint, KEYS[ORDERS]).send_message(QueueUrl=url, MessageBody="{}")
    payments = {s: _client(s, world.endpoint, KEYS[PAYMENTS]) for s in ("sqs", "dynamodb")}
    payments["dynamodb"].put_item(TableName="orders", Item={"pk": {"S": "by-payments"}})  # not sqs
    assert (
        _outcome(lambda: payments["sqs"].send_message(QueueUrl=url, MessageBody="{}")) == "RequestThrottled"
    )
    assert _injected(world) == [(PAYMENTS, "sqs", "SendMessage", "throttle", "before", 1)]
    assert world.queued(url) == 1


def test_a_seed_replays_the_same_faults_for_the_same_calls(world: World) -> None:
    def run(seed: int) -> tuple[list[str], list[dict[str, Any]]]:
        aws_faults.clear(world.endpoint)
        aws_faults.configure(world.endpoint, rate=0.5, seed=seed, services=["dynamodb"])
        fn = _client("dynamodb", world.endpoint, KEYS[ORDERS])
        outcomes = [
            _outcome(lambda: fn.get_item(TableName="orders", Key={"pk": {"S": "x"}})) for _ in range(30)
        ]
        return outcomes, aws_faults.injected(world.endpoint)

    first, first_counts = run(7)
    assert len(set(first)) >= 3  # successes and more than one kind of failure
    assert run(7) == (first, first_counts)
    assert run(8)[0] != first


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"rate": 1.5}, "rate must be a number from 0 to 1"),
        ({"rate": "0.1"}, "rate must be a number from 0 to 1"),
        ({"rate": True}, "rate must be a number from 0 to 1"),
        ({}, "rate must be a number from 0 to 1"),
        ({"rate": 0.1, "kinds": ["slow"]}, "kinds: unknown 'slow'; known: throttle, 5xx, timeout"),
        ({"rate": 0.1, "kinds": []}, "kinds must name at least one of"),
        (
            {"rate": 0.1, "services": ["kinesis"]},
            "services: unknown 'kinesis'; known: dynamodb, sqs, sns, s3",
        ),
        ({"rate": 0.1, "callers": "payments"}, "callers must be a list of strings"),
        ({"rate": 0.1, "seed": 1.5}, "seed must be an integer or null"),
        ({"rate": 0.1, "kind": ["throttle"]}, "unknown field(s) kind"),
    ],
)
def test_a_configuration_the_injector_refuses_is_a_400_that_says_why_and_changes_nothing(
    world: World, body: dict[str, Any], complaint: str
) -> None:
    aws_faults.configure(world.endpoint, rate=0.25, kinds=["throttle"])
    request = urllib.request.Request(
        f"{world.endpoint}{aws_faults.PATH}", data=json.dumps(body).encode(), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400
    message = json.loads(caught.value.read())["message"]
    assert complaint in message
    assert message.endswith("nothing changed")
    with urllib.request.urlopen(f"{world.endpoint}{aws_faults.PATH}") as response:
        assert json.loads(response.read())["config"] == {
            "rate": 0.25,
            "seed": None,
            "services": ["dynamodb", "sqs", "sns", "s3"],
            "kinds": ["throttle"],
            "callers": [],
        }


def test_the_client_raises_the_emulators_reason(world: World) -> None:
    with pytest.raises(aws_faults.FaultConfigError, match="unknown 'slow'"):
        aws_faults.configure(world.endpoint, rate=0.1, kinds=["slow"])
    garbage = urllib.request.Request(f"{world.endpoint}{aws_faults.PATH}", data=b"rate=1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(garbage)
    assert caught.value.code == 400


def test_delete_turns_faults_off_and_clears_the_counts(world: World) -> None:
    answer = aws_faults.configure(world.endpoint, rate=1.0, seed=3, kinds=["5xx"])
    assert answer == {
        "rate": 1.0,
        "seed": 3,
        "services": ["dynamodb", "sqs", "sns", "s3"],
        "kinds": ["5xx"],
        "callers": [],
    }
    fn = _client("dynamodb", world.endpoint, KEYS[ORDERS])
    assert _outcome(lambda: fn.put_item(TableName="orders", Item={"pk": {"S": "d"}})) == "InternalServerError"
    assert _injected(world) == [(ORDERS, "dynamodb", "PutItem", "5xx", "before", 1)]
    aws_faults.clear(world.endpoint)
    assert _injected(world) == []
    fn.put_item(TableName="orders", Item={"pk": {"S": "d"}})
    with urllib.request.urlopen(f"{world.endpoint}{aws_faults.PATH}") as response:
        assert json.loads(response.read()) == {
            "config": {
                "rate": 0.0,
                "seed": None,
                "services": ["dynamodb", "sqs", "sns", "s3"],
                "kinds": list(aws_faults.KINDS),
                "callers": [],
            },
            "injected": [],
        }
