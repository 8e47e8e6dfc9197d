"""Patches that make moto usable as a long-running emulator. Shared by the sandbox's moto server process
and the in-process pipeline test, so both run the same code.

1. moto keeps every model object it ever creates for its `/moto-api` dashboard (each received SQS
   message copy, each stream shard iterator): memory and CPU grow without bound in a long run.
2. moto's TransactWriteItems backs up EVERY table it touches with `copy.deepcopy` (items and the whole
   stream history) before applying, so a long run gets quadratically slower. The replacement checks
   every condition against the state before the transaction and then applies the writes — DynamoDB's
   own all-or-nothing semantics — without the snapshot, with `CancellationReasons` (and ALL_OLD items)
   as DynamoDB returns them.
3. moto's server is threaded and its DynamoDB backend has no locks: two concurrent conditional writes
   could both pass their check. Every DynamoDB write (single or transactional) runs under one lock, so
   conditions are atomic as they are in DynamoDB — the property idempotency depends on.
4. Request routing and logging overhead (profiled with py-spy during `make demo`: about a fifth of the
   server's CPU): for every request moto's dispatcher lists its package directory and tries a few
   hundred URL regexes, under one lock, to find the service; and werkzeug writes an access-log line.
   The host -> service answer is cached (the mapping never changes in a run) and access logs are off
   (warnings and errors still reach the log).
5. For every message it delivers to an SQS subscription without raw delivery, moto's SNS builds and
   signs a brand-new X.509 certificate, and keeps its PEM forever. Real SNS signs with a stable
   certificate: the patch builds one per subscription and reuses it; each message is still signed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_WRITE_LOCK = threading.RLock()
_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")


def untrack_models() -> None:
    from moto.core.common_models import BaseModel

    def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)

    BaseModel.__new__ = _untracked_new  # type: ignore[method-assign]


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    from moto.dynamodb.comparisons import get_filter_expression as condition_of
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    targets: set[tuple[str, str]] = set()
    reasons: list[tuple[Any, Any, Any]] = []
    for item in transact_items:
        if len(item) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(item.items()))
        table_name = op["TableName"]
        if op_type == "Put":
            table = self.get_table(table_name)
            key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = op["Item"][table.range_key_attr]
        else:
            key = op["Key"]
        target = (str(table_name), str(dict(sorted(key.items()))))
        if target in targets:
            raise MultipleTransactionsException()
        targets.add(target)
        current = self.get_item(table_name, key)
        condition = op.get("ConditionExpression")
        if condition is not None and not condition_of(
            condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
        ).expr(current):
            old = (
                current.to_json()["Attributes"]
                if current and op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                else None
            )
            reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed(item=old).message, old))
        else:
            reasons.append((None, None, None))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)
    for item in transact_items:
        op_type, op = next(iter(item.items()))
        if op_type == "Put":
            self.put_item(op["TableName"], op["Item"])
        elif op_type == "Delete":
            self.delete_item(op["TableName"], op["Key"])
        elif op_type == "Update":
            self.update_item(
                op["TableName"],
                op["Key"],
                update_expression=op["UpdateExpression"],
                expression_attribute_names=op.get("ExpressionAttributeNames"),
                expression_attribute_values=op.get("ExpressionAttributeValues"),
            )


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            return method(*args, **kwargs)

    wrapper.__wrapped__ = method  # type: ignore[attr-defined]
    return wrapper


def _install_dynamodb() -> dict[str, Callable[..., Any]]:
    from moto.dynamodb.models import DynamoDBBackend

    originals = {name: getattr(DynamoDBBackend, name) for name in _WRITES}
    patched = {**originals, "transact_write_items": _transact_write_items}
    for name, method in patched.items():
        setattr(DynamoDBBackend, name, _locked(method))
    return originals


@contextmanager
def fast_atomic_dynamodb() -> Iterator[None]:
    """Install patches 2 and 3 for the duration of the block."""
    from moto.dynamodb.models import DynamoDBBackend

    originals = _install_dynamodb()
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(DynamoDBBackend, name, method)


def fast_routing() -> None:
    import logging

    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    original = DomainDispatcherApplication.get_backend_for_host
    cache: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in cache:
            cache[host] = original(self, host)
        return cache[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


_SIGNING_CERTS: dict[str, str] = {}


def stable_sns_signing_cert() -> None:
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

    Subscription.get_post_data = get_post_data  # type: ignore[method-assign]


def install_for_server() -> None:
    """All patches, for the lifetime of a moto server process. (Not through the context manager: a
    generator-based one that is garbage-collected runs its `finally` and would undo the patch.)"""
    untrack_models()
    _install_dynamodb()
    fast_routing()
    stable_sns_signing_cert()
