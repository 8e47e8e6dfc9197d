"""Fake of a report-ready subscriber's webhook: records every notification it receives.

It does NOT deduplicate by ``Idempotency-Key`` (a naive subscriber acts on every POST), so
``deliveries_by_key()`` shows exactly how many times the notifier made it act: the notifier's
"at most once per report" is what a test asserts with ``deliveries_by_key() == {key: 1}``.

HTTP API (business calls pass through the common fault knobs of ``FaultKnobs`` first):
    POST /<any path>                 204; the body and headers are recorded as a delivery
    GET  /_admin/deliveries          {"deliveries": [{path, key, headers, body, at}]}
    GET  /_admin/deliveries-by-key   {Idempotency-Key: count}
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

from dataclasses import dataclass
from typing import Any, ClassVar

from local.fakes._server import (
    FakeService,
    FaultKnobs,
    JsonObject,
    Request,
    Response,
    error_response,
    utc_now,
)


@dataclass(frozen=True)
class WebhookKnobs(FaultKnobs):
    """The webhook has only the common fault knobs."""


class WebhookFake(FakeService[WebhookKnobs]):
    """``with WebhookFake() as hook: ...; assert hook.deliveries_by_key() == {"r-1:report-ready": 1}``

    ``calls()`` lists every request (faulted ones included, with status and fault);
    ``deliveries()`` the POSTs that got through to the subscriber, with their headers and body.
    """

    name: ClassVar[str] = "webhook"
    knobs_type: ClassVar[type[FaultKnobs]] = WebhookKnobs

    def __init__(
        self, knobs: WebhookKnobs | None = None, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._deliveries: list[JsonObject] = []

    def deliveries(self) -> list[JsonObject]:
        with self.lock:
            return [dict(d) for d in self._deliveries]

    def deliveries_by_key(self) -> dict[str, int]:
        """Deliveries per Idempotency-Key (``"-"`` for POSTs without one)."""
        with self.lock:
            counts: dict[str, int] = {}
            for delivery in self._deliveries:
                key = delivery["key"] or "-"
                counts[key] = counts.get(key, 0) + 1
            return counts

    def admin_views(self) -> dict[str, JsonObject]:
        counts: dict[str, int] = {}
        for delivery in self._deliveries:
            counts[delivery["key"] or "-"] = counts.get(delivery["key"] or "-", 0) + 1
        return {
            "deliveries": {"deliveries": [dict(d) for d in self._deliveries]},
            "deliveries-by-key": counts,
        }

    def reset_state(self) -> None:
        self._deliveries.clear()

    def handle(self, request: Request) -> Response:
        if request.method != "POST":
            return error_response(405, "MethodNotAllowed", "the webhook only takes POST")
        body: Any
        try:
            body = request.json()
        except ValueError:
            body = request.body.decode("utf-8", errors="replace")
        delivery = {
            "path": request.path,
            "key": request.idempotency_key,
            "headers": dict(request.headers),
            "body": body,
            "at": utc_now(),
        }
        with self.lock:
            self._deliveries.append(delivery)
        return Response(status=204)
