"""The service stacks.  They import the functions' contract modules (e.g.
`functions/orders/subscriptions.py`: event types and filter policies, standard library only by design;
`functions/<service>/settings.py`: what each function's environment holds, pydantic and `relay.settings`
only), so a subscription filter or a variable name is written once, where the handlers and their tests
read it too. In Lambda those modules are top-level packages (`orders`, ...): this puts `functions/` (and
the kernel) on the path the same way, once, for `app.py`, `cdk synth` and any script that imports the
stacks (pytest does it from `pyproject.toml`).
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
# The functions' contract modules, and the kernel their settings declarations import (relay.settings).
for _path in (str(_ROOT / "functions"), str(_ROOT / "layers" / "relay" / "python")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
