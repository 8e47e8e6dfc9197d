"""Calls to systems outside AWS (legacy payment system, invoice API, notification sender), once.

A DynamoDB transaction cannot include an HTTP call, so external side effects are guarded by
Powertools idempotency (``idempotent_function`` with DynamoDB persistence and payload validation)
AND by the downstream system's own idempotency key. Both are needed: Powertools remembers a
completed call and returns its stored result, but if we crash after the downstream applied the
request and before the result is saved, only the downstream key stops a second charge.

    result = run_once(
        "legacy-payment",
        downstream_key=f"{operation_id}:payment",
        payload={"amount": amount, "currency": currency},
        call=lambda key: payment_client.charge(..., idempotency_key=key),
        table_name=settings.idempotency_table,
    )

``call`` receives the downstream key, so a call site cannot forget to send it. Records live in the
service's idempotency table (partition key ``id``, TTL ``expiresAt``) under
``side-effect#<name>#<hash>``, next to the ``event#...`` markers of relay.idempotency.

Call ``register_lambda_context(context)`` at the start of the handler: Powertools then expires an
IN_PROGRESS record when the invocation that wrote it times out, instead of after the full expiry.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay.errors import DependencyUnavailable, PayloadConflict
from relay.http import WebhookClient

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_lambda_context: Any = None


def register_lambda_context(context: Any) -> None:
    """Remember the Lambda context for the in-progress expiry of every later run_once."""
    global _lambda_context
    _lambda_context = context


@functools.cache
def _persistence(table_name: str, ddb_client: DynamoDBClient) -> Any:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    # key_attr/expiry_attr are the table contract shared with relay.idempotency.
    return DynamoDBPersistenceLayer(
        table_name=table_name, key_attr="id", expiry_attr="expiresAt", boto3_client=ddb_client
    )


def record_id(name: str, downstream_key: str) -> str:
    """The id of ``run_once(name, downstream_key=...)``'s Powertools record in the idempotency table:
    ``side-effect#<name>#`` + the MD5 (Powertools' default hash) of the key as JSON, which is what
    Powertools hashes for ``event_key_jmespath="downstream_key"``. ``ops dlq redrive`` reads it to see
    that a redriven event's call happened; a moto test holds it to what Powertools writes."""
    digest = hashlib.md5(json.dumps(downstream_key, sort_keys=True).encode(), usedforsecurity=False)
    return f"side-effect#{name}#{digest.hexdigest()}"


def run_once(
    name: str,
    *,
    downstream_key: str,
    payload: Mapping[str, Any],
    call: Callable[[str], Mapping[str, Any]],
    table_name: str,
    expires_after_seconds: int = 86_400,
    ddb_client: DynamoDBClient | None = None,
) -> dict[str, Any]:
    """Run ``call(downstream_key)`` at most once per (name, downstream_key); return its result.

    The same key with a different ``payload`` raises PayloadConflict (permanent); a concurrent
    attempt still in progress raises DependencyUnavailable (transient: SQS retries it later).
    The result must be a JSON-serialisable dict (it is stored and replayed).
    """
    if not downstream_key:
        raise ValueError(
            f"run_once({name!r}) needs a non-empty downstream_key (the downstream idempotency key)"
        )
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyPersistenceLayerError,
        IdempotencyValidationError,
    )

    config = IdempotencyConfig(
        event_key_jmespath="downstream_key",
        payload_validation_jmespath="payload",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
    )
    if _lambda_context is not None:
        config.register_lambda_context(_lambda_context)

    @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools types it as Any
        data_keyword_argument="request",
        persistence_store=_persistence(table_name, ddb_client),
        config=config,
        key_prefix=f"side-effect#{name}",
    )
    def _invoke(request: dict[str, Any]) -> dict[str, Any]:
        return dict(call(request["downstream_key"]))

    try:
        result: dict[str, Any] = _invoke(request={"downstream_key": downstream_key, "payload": dict(payload)})
    except IdempotencyValidationError as exc:
        raise PayloadConflict(
            f"side effect {name} with downstream key {downstream_key} was already run with a different "
            "payload; not called again. Investigate the producer of this request."
        ) from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise DependencyUnavailable(
            f"side effect {name} with downstream key {downstream_key} is in progress elsewhere; "
            "retrying later."
        ) from exc
    except IdempotencyPersistenceLayerError as exc:
        raise DependencyUnavailable(
            f"idempotency table {table_name} unavailable for side effect {name}: {exc}"
        ) from exc
    return result


@dataclass(frozen=True)
class OnceWebhook:
    """A webhook whose every notification is sent at most once: Powertools idempotency on the
    idempotency table (``run_once``), and the downstream key in the request, so the receiver can
    deduplicate a send whose reply was lost too."""

    webhook: WebhookClient
    idempotency_table: str
    ddb_client: DynamoDBClient

    @classmethod
    def of(
        cls,
        url: str,
        *,
        timeout_seconds: float,
        what: str,
        idempotency_table: str,
        ddb_client: DynamoDBClient,
        connect_to: str | None = None,
    ) -> OnceWebhook:
        """``connect_to``: the address the URL's host was vetted at (``relay.callback_urls``)."""
        return cls(
            WebhookClient(url, timeout_seconds=timeout_seconds, what=what, connect_to=connect_to),
            idempotency_table,
            ddb_client,
        )

    def send_once(
        self,
        name: str,
        body: Mapping[str, Any],
        *,
        downstream_key: str,
        sign: Callable[[bytes], Mapping[str, str]] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The webhook's answer, and whether this call sent it (False: an earlier call did). ``sign``:
        headers over the bytes sent (``relay.http.post_json``), computed only when it is sent."""
        sent: list[bool] = []

        def send(key: str) -> Mapping[str, Any]:
            sent.append(True)
            return self.webhook.send(dict(body), idempotency_key=key, sign=sign)

        result = run_once(
            name,
            downstream_key=downstream_key,
            payload=body,
            call=send,
            table_name=self.idempotency_table,
            ddb_client=self.ddb_client,
        )
        return result, bool(sent)
