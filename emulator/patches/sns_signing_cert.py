"""SNS signs every message to a subscription with one certificate, not a new one each (patch 5).

moto's behaviour: for every message it delivers to a subscription without raw delivery,
``Subscription.get_post_data`` (moto/sns/models.py) builds and signs a brand-new X.509 certificate
(an RSA signature and a random serial each time) under a new ``SigningCertURL``, and keeps its PEM in
the backend's ``_message_public_keys`` forever: CPU per message, and memory that grows with every
message delivered. Its ``UnsubscribeURL`` names a fixed made-up subscription in us-east-1.

AWS's behaviour: SNS signs each message (``Signature``, ``SignatureVersion`` 2: SHA256) with a
certificate that stays the same from message to message, so a subscriber fetches it from
``SigningCertURL`` once and reuses it; ``UnsubscribeURL`` unsubscribes the endpoint's own subscription
(https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html,
https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html). The patch builds one
certificate per subscription and reuses it; every message is still signed, over the same string moto
signs, and its ``UnsubscribeURL`` names its subscription in its region.

Upstream: yes. A subscriber that verifies signatures (as the AWS docs tell it to) fetches a new
certificate per message from moto, and a long run leaks one PEM per message; one certificate per
backend is simpler than what moto does now. ``docs/upstream/sns_signing_cert.md``.

Patches: moto 5.2.5, ``Subscription.get_post_data``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}

_SIGNING_CERTS: dict[str, str] = {}  # subscription ARN -> the name of its certificate's PEM


def install() -> Callable[[], None]:
    """Install patch 5; returns a function that removes it."""
    import base64
    from datetime import timedelta

    import cryptography.x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    from cryptography.x509 import Name, NameAttribute
    from cryptography.x509.oid import NameOID
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.core.utils import iso_8601_datetime_with_milliseconds, utcnow
    from moto.sns.models import Subscription, sns_backends

    def get_post_data(
        self: Any,
        message: str,
        message_id: str,
        subject: str | None,
        message_attributes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        key = self.private_key()
        region = self.topic.sns_backend.region_name
        key_name = _SIGNING_CERTS.get(self.arn)
        if key_name is None:
            issuer = [
                NameAttribute(NameOID.COUNTRY_NAME, "US"),
                NameAttribute(NameOID.ORGANIZATION_NAME, "Amazon"),
                NameAttribute(NameOID.COMMON_NAME, "Amazon RSA 2048 M01"),
            ]
            cert = (
                cryptography.x509.CertificateBuilder()
                .subject_name(Name([NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")]))
                .issuer_name(Name(issuer))
                .public_key(key.public_key())
                .serial_number(cryptography.x509.random_serial_number())
                .not_valid_before(utcnow())
                .not_valid_after(utcnow() + timedelta(days=365))
                .sign(key, hashes.SHA256())
            )
            key_name = f"SimpleNotificationService-{len(_SIGNING_CERTS):08d}.pem"
            sns_backends[DEFAULT_ACCOUNT_ID][region]._message_public_keys[key_name] = cert.public_bytes(
                serialization.Encoding.PEM
            )
            _SIGNING_CERTS[self.arn] = key_name
        timestamp = iso_8601_datetime_with_milliseconds()
        string_to_sign = (
            f"Message\n{message}\nMessageId\n{message_id}\nTimestamp\n{timestamp}\n"
            f"TopicArn\n{self.topic.arn}\nType\nNotification\n"
        )
        signature = key.sign(string_to_sign.encode("UTF-8"), padding.PKCS1v15(), hashes.SHA256())
        post_data: dict[str, Any] = {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": self.topic.arn,
            "Message": message,
            "Timestamp": timestamp,
            "SignatureVersion": "2",
            "Signature": base64.b64encode(signature).decode("utf-8"),
            "SigningCertURL": f"https://sns.{region}.amazonaws.com/{key_name}",
            "UnsubscribeURL": f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={self.arn}",
        }
        if subject:
            post_data["Subject"] = subject
        if message_attributes:
            post_data["MessageAttributes"] = message_attributes
        return post_data

    original = Subscription.get_post_data
    Subscription.get_post_data = get_post_data  # type: ignore[method-assign]

    def remove() -> None:
        Subscription.get_post_data = original  # type: ignore[method-assign]

    return remove
