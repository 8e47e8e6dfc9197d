"""An agent's score: the share of its reports that verified, smoothed for small samples.

    score = (verified + 1) / (total + 2)

``verified`` counts the agent's VERIFIED reports and ``total`` all its verified, MISMATCH and
UNREACHABLE reports, over every verification record checked before the end of the snapshot hour
(cumulative, not per hour). It is the mean of a Beta(1, 1) prior updated with the outcomes (Laplace's
rule of succession): an agent with no evidence scores 0.5, one report moves it only to 0.67 or 0.33,
and the score approaches the plain verified share as reports accumulate -- so a newcomer with one
lucky report does not outrank an agent with 99 of 100 verified (0.98).

The score is a Decimal rounded half-even to 4 places and stored as a string: the same inputs give
the same text on every run, which is what lets a second run of an hour compare equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

VERIFIED = "VERIFIED"
MISMATCH = "MISMATCH"
UNREACHABLE = "UNREACHABLE"
FINAL_STATUSES = frozenset({VERIFIED, MISMATCH, UNREACHABLE})
PLACES = Decimal("0.0001")


@dataclass(frozen=True)
class Tally:
    verified: int = 0
    mismatched: int = 0
    unreachable: int = 0

    @property
    def total(self) -> int:
        return self.verified + self.mismatched + self.unreachable

    def add(self, status: str) -> Tally:
        if status == VERIFIED:
            return Tally(self.verified + 1, self.mismatched, self.unreachable)
        if status == MISMATCH:
            return Tally(self.verified, self.mismatched + 1, self.unreachable)
        if status == UNREACHABLE:
            return Tally(self.verified, self.mismatched, self.unreachable + 1)
        raise ValueError(f"status {status!r} is not a final verification status")


def score(tally: Tally) -> Decimal:
    return (Decimal(tally.verified + 1) / Decimal(tally.total + 2)).quantize(PLACES, rounding=ROUND_HALF_EVEN)


def tally_by_agent(records: Iterable[tuple[str, str]]) -> tuple[dict[str, Tally], int]:
    """``(agentId, status)`` pairs -> a Tally per agent, and how many records were skipped (not final)."""
    tallies: dict[str, Tally] = {}
    skipped = 0
    for agent_id, status in records:
        if status not in FINAL_STATUSES:
            skipped += 1
            continue
        tallies[agent_id] = tallies.get(agent_id, Tally()).add(status)
    return tallies, skipped
