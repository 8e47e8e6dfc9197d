"""The service stacks.

They import the functions' contract modules (e.g. `functions/orders/subscriptions.py`: event types and
filter policies, standard library only by design), so a subscription filter is written once, where the
handlers and their tests read it too. In Lambda those modules are top-level packages (`orders`, ...):
this puts `functions/` on the path the same way, once, for `app.py`, `cdk synth` and any script that
imports the stacks (pytest does it from `pyproject.toml`).
"""

from __future__ import annotations

import sys
from pathlib import Path

FUNCTIONS = str(Path(__file__).resolve().parents[2] / "functions")
if FUNCTIONS not in sys.path:
    sys.path.insert(0, FUNCTIONS)
