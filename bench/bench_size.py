"""How big ``make bench``'s runs are: ``BENCH_SIZE=small`` runs every benchmark in seconds.

CI runs ``make bench`` that way (tests/sandbox/test_make_targets.py), so a benchmark that no longer
runs fails the suite; the figures of a small run are too noisy to quote.
"""

from __future__ import annotations

import os

SMALL = os.environ.get("BENCH_SIZE", "full") == "small"


def scaled(full: int, small: int) -> int:
    """``full`` for a real run, ``small`` under ``BENCH_SIZE=small``."""
    return small if SMALL else full
