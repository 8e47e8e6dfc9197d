"""make cost-scale's verdict: per-payment counts must not grow; a poller's batched requests are bounded
by the messages they could carry, since how full a batch comes depends on the rate, not the volume."""

from bench.scale_check import compare


def test_a_count_per_payment_that_grows_is_named() -> None:
    small = {"per_payment": {"dynamodb:Query": 1.0}}
    large = {"per_payment": {"dynamodb:Query": 1.5}}
    assert compare(small, large, 0.10) == ["dynamodb:Query: 1.000 -> 1.500 per payment"]


def test_a_count_within_the_tolerance_passes() -> None:
    assert (
        compare({"per_payment": {"dynamodb:Query": 1.0}}, {"per_payment": {"dynamodb:Query": 1.09}}, 0.10)
        == []
    )


def test_idle_polling_is_not_compared() -> None:
    kind = "sqs:ReceiveMessage (empty, idle polling)"
    assert compare({"per_payment": {kind: 0.1}}, {"per_payment": {kind: 5.0}}, 0.10) == []


def test_fuller_or_emptier_batches_pass_while_under_one_request_per_message() -> None:
    small = {"per_payment": {"sns:Deliver to SQS": 5.0, "sqs:ReceiveMessage": 2.2}}
    large = {"per_payment": {"sns:Deliver to SQS": 5.0, "sqs:ReceiveMessage": 3.3}}
    assert compare(small, large, 0.10) == []


def test_more_polls_than_messages_is_named() -> None:
    small = {"per_payment": {"sns:Deliver to SQS": 5.0, "sqs:ReceiveMessage": 2.2}}
    large = {"per_payment": {"sns:Deliver to SQS": 5.0, "sqs:ReceiveMessage": 6.0}}
    assert compare(small, large, 0.10) == [
        "sqs:ReceiveMessage: 6.000 per payment, above one per message (5.000)"
    ]
