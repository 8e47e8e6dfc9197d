"""``python -m ops deadlines [--rebalance]``: the payments deadline index, shard by shard.

Shows how many operations each shard of the ``due`` index holds, under the stage's shard count as its
sweeper has it (``DEADLINE_SHARDS``, and ``DEADLINE_READ_SHARDS`` while the stage moves to fewer
shards). ``--rebalance`` is the backfill of that move: every item still in a shard at or above the new
count moves into one below it (``relay.deadlines.rebalance``, each move conditional on the item being
where it was found). Then deploy without ``payments.deadline_read_shards``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ops.app import App


def stage_shards(app: App) -> tuple[int, int]:
    """(the count writers hash into, the count readers read) of the stage, from its sweeper."""
    from relay import deadlines

    sweeper = next((f for f in app.functions() if "DEADLINE_SHARDS" in f.environment), None)
    if sweeper is None:
        return deadlines.DEFAULT_SHARDS, deadlines.DEFAULT_SHARDS
    write = int(sweeper.environment["DEADLINE_SHARDS"])
    return write, max(write, int(sweeper.environment.get("DEADLINE_READ_SHARDS") or 0))


def run(app: App, *, rebalance: bool) -> int:
    from relay import deadlines

    table = app.name("payments", "operations")
    ddb = app.client("dynamodb")
    write, read = stage_shards(app)
    if rebalance and read == write:
        print(f"{table}: writers and readers both use {write} shards; nothing to rebalance")
    elif rebalance:
        moved = deadlines.rebalance(ddb, table, shards=write, read_shards=read)
        print(f"{table}: moved {moved} item(s) from shards {write}..{read - 1} into 0..{write - 1}")
    counts = deadlines.shard_counts(ddb, table, read_shards=read)
    print(f"{table}: index {deadlines.INDEX_NAME}, {write} shard(s) written, {read} read")
    for shard, n in counts.items():
        if n:
            note = "  <- above the count: run --rebalance" if deadlines.shard_number(shard) >= write else ""
            print(f"  {shard:10} {n:>8}{note}")
    left = sum(n for s, n in counts.items() if deadlines.shard_number(s) >= write)
    if read > write:
        print(
            "ready: deploy without payments.deadline_read_shards"
            if left == 0
            else f"{left} item(s) still above the count: run --rebalance"
        )
    return 0


def register(subparsers: Any, add_connection_arguments: Any, connect: Any) -> None:
    parser = subparsers.add_parser(
        "deadlines",
        help="the payments deadline index by shard; --rebalance moves items into a smaller shard count",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rebalance", action="store_true", help="move items above the shard count")
    add_connection_arguments(parser)
    parser.set_defaults(run=lambda args: run(connect(args), rebalance=args.rebalance))
