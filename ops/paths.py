"""The code the operations toolkit runs beside the stage's: the services' modules (``functions/``:
``payments``, ``orders``, ... are top-level packages in Lambda) and the kernel (``layers/relay/python``:
``relay``, from ``/opt/python`` in Lambda).

``python -m ops`` puts them on ``sys.path`` once, at its start (``ops.__main__.main``), the same way the
CDK app does (``infra/stacks/__init__.py``) and pytest does (``pyproject.toml``'s ``pythonpath``); no
module of ``ops`` changes the path as a side effect of being imported or called.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# In the order infra/stacks/__init__.py inserts them: the kernel ends up first.
FUNCTION_CODE = (ROOT / "functions", ROOT / "layers" / "relay" / "python")


def use_function_code() -> None:
    """Make ``relay`` and the services' packages importable (idempotent)."""
    for path in map(str, FUNCTION_CODE):
        if path not in sys.path:
            sys.path.insert(0, path)
