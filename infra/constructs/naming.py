"""Physical names: every named resource of a service is `relay-<stage>-<service>-<name>`.

The local sandbox, the ops CLI and the e2e tests find queues, tables and topics by these names, so the
stack hands one `Naming` to each construct instead of every construct spelling the pattern out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Naming:
    prefix: str  # `relay-<stage>`
    service: str

    def __call__(self, name: str) -> str:
        return f"{self.prefix}-{self.service}-{name}"
