"""What a benchmark of in-process moto (``mock_aws``) sets before it imports boto3: the repo root on
``sys.path`` (for ``emulator.moto_patches``) and dummy credentials in us-east-1, unless already set."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def prepare() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        os.environ.setdefault(name, value)
