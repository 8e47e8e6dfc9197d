"""Load stock levels into the orders service's inventory table.

Usage (from the repository root)::

    python -m ops.seed_stock --table <InventoryTableName> [--file ops/stock.json]
                             [--endpoint-url http://127.0.0.1:5000] [--region eu-west-1] [--dry-run]

The file is a JSON object ``{"<sku>": <available units>, ...}`` (``ops/stock.json`` is the demo's).
For each SKU the stock item ``pk = SKU#<sku>, sk = STOCK`` gets ``available`` SET to the given level;
``reserved`` (what open orders hold) is kept, or starts at 0. Running it twice is harmless: it sets
levels, it does not add to them. It prints one line per SKU with the level before and after.

Setting ``available`` while orders are being reserved overwrites the decrements that happened since
the file was written -- seed before traffic (deploy, sandbox demo), or accept that the file is the
truth. ``--endpoint-url`` points it at the local sandbox's emulator; credentials and region come from
the usual AWS environment (``AWS_PROFILE``, ``AWS_REGION``...).

The key shape and attribute names mirror ``functions/orders/store.py`` (the Lambda code is a separate
asset, not importable from here); ``tests/handlers/orders/test_seed_stock.py`` checks that the orders
inventory store reads what this writes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_FILE = Path(__file__).with_name("stock.json")
_SKU = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # as functions/orders/models.py accepts


class SeedError(ValueError):
    """The seed file is not a valid ``{sku: available}`` object."""


@dataclass(frozen=True)
class Change:
    sku: str
    before: int | None  # None: the SKU had no stock item
    after: int
    reserved: int

    def describe(self) -> str:
        was = "new" if self.before is None else f"was {self.before}"
        return f"SKU#{self.sku}: available {self.after} ({was}; reserved {self.reserved})"


def load_levels(path: Path) -> dict[str, int]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SeedError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise SeedError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_levels(document, source=str(path))


def validate_levels(document: Any, *, source: str = "stock levels") -> dict[str, int]:
    if not isinstance(document, dict) or not document:
        raise SeedError(f'{source}: expected a non-empty JSON object {{"<sku>": <available units>}}')
    problems = []
    for sku, level in document.items():
        if not _SKU.match(sku):
            problems.append(f"{sku!r} is not a SKU (letters, digits, '.', '_', '-'; at most 64)")
        if type(level) is not int or level < 0:
            problems.append(f"{sku}: {level!r} is not a whole number of units >= 0")
    if problems:
        raise SeedError(f"{source}: " + "; ".join(problems))
    return dict(document)


def seed_stock(
    levels: Mapping[str, int], *, table: str, ddb_client: Any, dry_run: bool = False
) -> list[Change]:
    """Set ``available`` for every SKU (one UpdateItem each); returns what changed."""
    changes = []
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    for sku, level in sorted(levels.items()):
        key = {"pk": {"S": f"SKU#{sku}"}, "sk": {"S": "STOCK"}}
        if dry_run:
            item = ddb_client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
            before = int(item["available"]["N"]) if "available" in item else None
            reserved = int(item["reserved"]["N"]) if "reserved" in item else 0
            changes.append(Change(sku, before, level, reserved))
            continue
        response = ddb_client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression=(
                "SET #available = :level, #reserved = if_not_exists(#reserved, :zero), "
                "#kind = :kind, #sku = :sku, #seededAt = :now"
            ),
            ExpressionAttributeNames={
                "#available": "available",
                "#reserved": "reserved",
                "#kind": "kind",
                "#sku": "sku",
                "#seededAt": "seededAt",
            },
            ExpressionAttributeValues={
                ":level": {"N": str(level)},
                ":zero": {"N": "0"},
                ":kind": {"S": "stock"},
                ":sku": {"S": sku},
                ":now": {"S": now},
            },
            ReturnValues="ALL_OLD",
        )
        old = response.get("Attributes") or {}
        before = int(old["available"]["N"]) if "available" in old else None
        reserved = int(old["reserved"]["N"]) if "reserved" in old else 0
        changes.append(Change(sku, before, level, reserved))
    return changes


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _connection(args: argparse.Namespace) -> dict[str, str]:
    """Region and credentials: the AWS environment's; against the local sandbox (a loopback endpoint)
    the sandbox's region and dummy credentials when the environment has none."""
    options: dict[str, str] = {}
    if args.region:
        options["region_name"] = args.region
    host = urlsplit(args.endpoint_url).hostname if args.endpoint_url else None
    if host in LOCAL_HOSTS:
        env = os.environ
        if not (args.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
            options["region_name"] = "us-east-1"
        if not env.get("AWS_ACCESS_KEY_ID") and not env.get("AWS_PROFILE"):
            options.update(aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106
    return options


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.seed_stock", description="Set stock levels in the orders inventory table."
    )
    parser.add_argument("--table", required=True, help="inventory table name (the orders stack's output)")
    parser.add_argument(
        "--file", type=Path, default=DEFAULT_FILE, help="JSON {sku: available} (default ops/stock.json)"
    )
    parser.add_argument("--endpoint-url", help="DynamoDB endpoint, e.g. the local sandbox's emulator")
    parser.add_argument("--region", help="AWS region (default: from the AWS environment)")
    parser.add_argument("--dry-run", action="store_true", help="show what would be set; write nothing")
    args = parser.parse_args(argv)

    try:
        levels = load_levels(args.file)
    except SeedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        # (the stubs cannot type the **connection keywords)
        client = boto3.client(  # type: ignore[call-overload]
            "dynamodb", endpoint_url=args.endpoint_url, **_connection(args)
        )
        changes = seed_stock(levels, table=args.table, ddb_client=client, dry_run=args.dry_run)
    except (BotoCoreError, ClientError) as exc:
        print(f"error: could not seed {args.table}: {exc}", file=sys.stderr)
        return 2
    verb = "would set" if args.dry_run else "set"
    for change in changes:
        print(f"{verb} {change.describe()}")
    suffix = " (dry run: nothing written)" if args.dry_run else ""
    print(f"{len(changes)} SKU(s) {verb} in {args.table}{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
