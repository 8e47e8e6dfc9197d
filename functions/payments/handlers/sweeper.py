"""Sweeper: sweeps queue (SweepDue, put there by an EventBridge Scheduler schedule every few minutes)
-> the deadline index of the operations table -> re-drive, give up, re-publish. Domain:
``payments.sweeper.sweep``."""

from __future__ import annotations

from payments.settings import SWEEPER
from payments.subscriptions import SWEEP_DUE
from payments.sweeper import sweep
from payments.wiring import Wiring, wiring
from relay.consumer import RecordContext, queue_handler
from relay.envelope import Envelope
from relay.errors import InvalidInput


def _sweep(wired: Wiring, envelope: Envelope, ctx: RecordContext) -> None:
    if envelope.event_type != SWEEP_DUE:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; the sweeper handles {SWEEP_DUE}"
        )
    sweep(wired, envelope)


handler = queue_handler(wiring.checked(SWEEPER), _sweep)
