"""Patch 5 (``emulator.patches.sns_signing_cert``): the certificates SNS signs messages to an SQS
subscription with, with and without the patch; every signature verifies against its certificate."""

from __future__ import annotations

import base64
import json
from typing import Any

import boto3
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from emulator.patches import sns_signing_cert
from tests.sandbox.patches.support import installed


def _three_notifications() -> tuple[str, list[dict[str, Any]], dict[str, bytes]]:
    """Three messages published to a topic with one SQS subscription (not raw): the subscription's
    ARN, the notifications the queue received, and the PEMs moto keeps for ``SigningCertURL``."""
    from moto.sns.models import sns_backends

    with mock_aws():
        sns = boto3.client("sns", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        topic = sns.create_topic(Name="events")["TopicArn"]
        url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        subscription = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)["SubscriptionArn"]
        for i in range(3):
            sns.publish(TopicArn=topic, Message=f"m{i}")
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        notifications = sorted((json.loads(m["Body"]) for m in received), key=lambda n: str(n["Message"]))
        keys = dict(sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]._message_public_keys)
    return subscription, notifications, keys


def _verifies(notification: dict[str, Any], pem: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    from cryptography.x509 import load_pem_x509_certificate

    signed = "".join(
        f"{name}\n{notification[name]}\n"
        for name in ("Message", "MessageId", "Timestamp", "TopicArn", "Type")
    )
    try:
        load_pem_x509_certificate(pem).public_key().verify(
            base64.b64decode(notification["Signature"]),
            signed.encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
    except InvalidSignature:
        return False
    return True


def _pem(notification: dict[str, Any], keys: dict[str, bytes]) -> bytes:
    return keys[notification["SigningCertURL"].rsplit("/", 1)[1]]


def test_every_message_to_a_subscription_is_signed_with_one_certificate() -> None:
    """moto builds (and keeps) a certificate per message, and its UnsubscribeURL names no real
    subscription; with the patch, one certificate per subscription, each message still signed."""
    subscription, notifications, keys = _three_notifications()
    assert len({n["SigningCertURL"] for n in notifications}) == len(keys) == 3
    assert all(_verifies(n, _pem(n, keys)) for n in notifications)
    assert not any(n["UnsubscribeURL"].endswith(subscription) for n in notifications)

    with installed(sns_signing_cert.install):
        subscription, notifications, keys = _three_notifications()
    assert [n["Message"] for n in notifications] == ["m0", "m1", "m2"]
    assert len({n["SigningCertURL"] for n in notifications}) == len(keys) == 1
    assert all(_verifies(n, _pem(n, keys)) for n in notifications)
    assert len({n["Signature"] for n in notifications}) == 3
    assert all(
        n["UnsubscribeURL"]
        == f"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription}"
        for n in notifications
    )
