"""What a loyalty function is wired with: settings, AWS clients, the points store.

Built once per process on first use (``relay.wiring``). The API answers a client: its client fails
fast; the points consumer's is the standard one.
"""

from __future__ import annotations

import functools

from loyalty.settings import Settings
from loyalty.store import PointsStore
from relay.clients import aws_client
from relay.wiring import ServiceWiring, Wired


class Wiring(ServiceWiring[Settings]):
    @functools.cached_property
    def points(self) -> PointsStore:
        return PointsStore(
            points_table=self.settings.require("points_table"),
            idempotency_table=None,
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def api_points(self) -> PointsStore:
        return PointsStore(
            points_table=self.settings.require("points_table"),
            idempotency_table=None,
            ddb_client=aws_client("dynamodb", fast=True),
        )


wiring = Wired(lambda: Wiring(Settings.from_env()))
