"""The chaos verdict's per-order loyalty rule (``local.chaos.points_wrong_for``), without a sandbox.

CI's 300-operation run once met an order paid before its reservation and then REJECTED for stock: its
accrual and its equal reversal are both right, and the first version of the rule failed it.
"""

from __future__ import annotations

from typing import Any

import pytest

from local.chaos import points_wrong_for


def _accrual(points: int) -> dict[str, Any]:
    return {"orderId": "o-1", "kind": "ACCRUAL", "points": points}


def _reversal(points: int) -> dict[str, Any]:
    return {"orderId": "o-1", "kind": "REVERSAL", "points": -points}


@pytest.mark.parametrize(
    ("status", "ledger"),
    [
        ("PAID", [_accrual(30)]),
        ("REJECTED", [_accrual(30), _reversal(30)]),
        ("REJECTED", [_reversal(30), _accrual(30)]),
        ("REJECTED", []),
        ("CANCELLED", []),
    ],
)
def test_a_right_ledger_passes(status: str, ledger: list[dict[str, Any]]) -> None:
    assert points_wrong_for(status, ledger, owed=30) == ""


@pytest.mark.parametrize(
    ("status", "ledger"),
    [
        ("PAID", []),
        ("PAID", [_accrual(30), _accrual(30)]),
        ("PAID", [_accrual(20)]),
        ("PAID", [_accrual(30), _reversal(30)]),
        ("REJECTED", [_accrual(30)]),
        ("REJECTED", [_accrual(30), _reversal(0)]),
        ("REJECTED", [_reversal(30)]),
        ("CANCELLED", [_accrual(30), _reversal(30)]),
        ("CANCELLED", [_accrual(30)]),
    ],
)
def test_a_wrong_ledger_is_named(status: str, ledger: list[dict[str, Any]]) -> None:
    assert points_wrong_for(status, ledger, owed=30).startswith(status)
