"""Notice sender: notices queue (every terminal event via SNS) -> the client's callback URL, signed,
once. Domain: ``payments.notices.send_notice``."""

from __future__ import annotations

from payments.notices import send_notice
from payments.settings import NOTICE_SENDER
from payments.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(NOTICE_SENDER), lambda w, envelope, _ctx: send_notice(envelope, w.notices)
)
