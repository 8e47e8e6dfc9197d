"""Fake of a webhook receiver (a report-ready subscriber, a client's ``callbackUrl``): records every
notification it receives and, given a signing secret, checks each one's Standard Webhooks signature.

It does NOT deduplicate by ``Idempotency-Key`` (a naive subscriber acts on every POST), so
``deliveries_by_key()`` shows exactly how many times the notifier made it act: the notifier's
"at most once per report" is what a test asserts with ``deliveries_by_key() == {key: 1}``.

Signatures: with a secret (``WebhookFake(signing_secret=...)``, ``set_signing_secret`` or ``POST
/_admin/signing-secret``), each delivery records ``signature``: ``"valid"``, or ``"invalid: <why>"``
(``relay.signing.verify`` over the raw body bytes and the ``webhook-*`` headers). Without one,
``"unsigned"``: nothing was checked. Deliveries are recorded either way (a receiver that refuses a
bad signature still got the POST): ``notices_by_key() == {key: {"valid": 1}}`` is the assertion that
a notice arrived once, signed.

HTTP API (business calls pass through the common fault knobs of ``FaultKnobs`` first):
    POST /<any path>                 204; the body and headers are recorded as a delivery
    GET  /_admin/deliveries          {"deliveries": [{path, key, headers, body, raw, signature, at}]}
    GET  /_admin/deliveries-by-key   {Idempotency-Key: count}
    GET  /_admin/notices-by-key      {Idempotency-Key: {signature verdict: count}}
    POST /_admin/signing-secret      {"secret": "..."} checks signatures from now on; {"secret": null} stops
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from local.fakes._server import (
    FakeService,
    FaultKnobs,
    JsonObject,
    Request,
    Response,
    error_response,
    json_response,
    utc_now,
)

UNSIGNED = "unsigned"
VALID = "valid"
# The sandbox's own processes run with only the project root on sys.path (the kernel is a Lambda layer
# there): the fake finds relay.signing in the layer's source, as local/demo.py does for relay.envelope.
_KERNEL_DIR = Path(__file__).resolve().parents[2] / "layers" / "relay" / "python"


@dataclass(frozen=True)
class WebhookKnobs(FaultKnobs):
    """The webhook has only the common fault knobs."""


class WebhookFake(FakeService[WebhookKnobs]):
    """``with WebhookFake() as hook: ...; assert hook.deliveries_by_key() == {"r-1:report-ready": 1}``

    ``calls()`` lists every request (faulted ones included, with status and fault);
    ``deliveries()`` the POSTs that got through to the subscriber, with their headers, body and
    signature verdict; ``notices_by_key()`` the verdicts counted per Idempotency-Key.
    """

    name: ClassVar[str] = "webhook"
    knobs_type: ClassVar[type[FaultKnobs]] = WebhookKnobs

    def __init__(
        self,
        knobs: WebhookKnobs | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        quiet: bool = True,
        signing_secret: str | None = None,
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._deliveries: list[JsonObject] = []
        _check_secret(signing_secret)
        self._initial_signing_secret = signing_secret
        self._signing_secret = signing_secret

    def deliveries(self) -> list[JsonObject]:
        with self.lock:
            return [dict(d) for d in self._deliveries]

    def deliveries_by_key(self) -> dict[str, int]:
        """Deliveries per Idempotency-Key (``"-"`` for POSTs without one)."""
        with self.lock:
            return self._deliveries_by_key()

    def notices_by_key(self) -> dict[str, dict[str, int]]:
        """Per Idempotency-Key (``"-"`` for POSTs without one), the deliveries per signature verdict:
        ``{"op-1:completed": {"valid": 1, "invalid: ... does not match the body ...": 2}}``."""
        with self.lock:
            return self._notices_by_key()

    def set_signing_secret(self, secret: str | None) -> None:
        """Check signatures with `secret` from the next delivery on (``None``: stop checking). ``reset()``
        restores the secret given to the constructor, as it does the knobs."""
        _check_secret(secret)
        with self.lock:
            self._signing_secret = secret

    def admin_views(self) -> dict[str, JsonObject]:
        return {
            "deliveries": {"deliveries": [dict(d) for d in self._deliveries]},
            "deliveries-by-key": self._deliveries_by_key(),
            "notices-by-key": self._notices_by_key(),
        }

    def reset_state(self) -> None:
        self._deliveries.clear()
        self._signing_secret = self._initial_signing_secret

    def dispatch(self, request: Request) -> Response:
        # FakeService routes only knobs and reset as admin POSTs; this one is the webhook's own.
        if request.method == "POST" and request.path.rstrip("/") == "/_admin/signing-secret":
            return self._admin_signing_secret(request)
        return super().dispatch(request)

    def handle(self, request: Request) -> Response:
        if request.method != "POST":
            return error_response(405, "MethodNotAllowed", "the webhook only takes POST")
        body: Any
        try:
            body = request.json()
        except ValueError:
            body = request.body.decode("utf-8", errors="replace")
        with self.lock:
            secret = self._signing_secret
        delivery = {
            "path": request.path,
            "key": request.idempotency_key,
            "headers": dict(request.headers),
            "body": body,
            "raw": request.body.decode("utf-8", errors="replace"),  # the bytes a verifier checks
            "signature": UNSIGNED if secret is None else _verdict(secret, request),
            "at": utc_now(),
        }
        with self.lock:
            self._deliveries.append(delivery)
        return Response(status=204)

    # called with the lock held -----------------------------------------------------------------

    def _deliveries_by_key(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for delivery in self._deliveries:
            key = delivery["key"] or "-"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def _notices_by_key(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for delivery in self._deliveries:
            verdicts = counts.setdefault(delivery["key"] or "-", {})
            verdicts[delivery["signature"]] = verdicts.get(delivery["signature"], 0) + 1
        return counts

    def _admin_signing_secret(self, request: Request) -> Response:
        usage = 'POST /_admin/signing-secret takes {"secret": "<non-empty string>"} or {"secret": null}'
        try:
            payload = request.json()
        except ValueError:
            return error_response(400, "InvalidJson", usage)
        if not isinstance(payload, dict) or "secret" not in payload:
            return error_response(400, "InvalidSigningSecret", usage)
        secret = payload["secret"]
        if secret is not None and not (isinstance(secret, str) and secret):
            return error_response(400, "InvalidSigningSecret", usage)
        self.set_signing_secret(secret)
        # Never echo the secret: admin answers end up in test output and logs.
        return json_response(200, {"checkingSignatures": secret is not None})


def _check_secret(secret: str | None) -> None:
    if secret is not None and not secret:
        raise ValueError("the webhook fake's signing secret is empty; pass a non-empty secret, or None")


def _verdict(secret: str, request: Request) -> str:
    if importlib.util.find_spec("relay") is None:
        sys.path.append(str(_KERNEL_DIR))  # appended: a relay already on the path always wins
    from relay.signing import SignatureError, verify

    try:
        verify(secret, request.body, dict(request.headers))
    except (SignatureError, ValueError) as exc:
        return f"invalid: {exc}"
    return VALID
