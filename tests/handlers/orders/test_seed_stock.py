"""``python -m ops.seed_stock``: stock levels are set (not added), reserved units are kept, and what it
writes is what the orders inventory store reads."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from orders.store import InventoryStore

from ops.seed_stock import DEFAULT_FILE, SeedError, _connection, load_levels, main, seed_stock

TABLE = "orders-inventory"


@pytest.fixture
def ddb() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def test_seeded_levels_are_what_the_inventory_store_reads(ddb: object) -> None:
    seed_stock({"SKU-MUG": 10, "SKU-TEAPOT": 0}, table=TABLE, ddb_client=ddb)

    store = InventoryStore(inventory_table=TABLE, ddb_client=ddb)
    mug, teapot = store.get_stock("SKU-MUG"), store.get_stock("SKU-TEAPOT")
    assert mug is not None and (mug.available, mug.reserved) == (10, 0)
    assert teapot is not None and (teapot.available, teapot.reserved) == (0, 0)


def test_seeding_twice_sets_the_level_instead_of_adding_and_keeps_what_is_reserved(ddb: object) -> None:
    seed_stock({"SKU-MUG": 10}, table=TABLE, ddb_client=ddb)
    store = InventoryStore(inventory_table=TABLE, ddb_client=ddb)
    from orders.orders import OrderLine

    from relay.ddb import BusinessWrite

    take: BusinessWrite = store.take_write(
        OrderLine("SKU-MUG", 3), on_condition_failed=lambda _o: Exception()
    )
    ddb.transact_write_items(TransactItems=[dict(take.transact_item)])  # type: ignore[attr-defined]

    changes = seed_stock({"SKU-MUG": 10}, table=TABLE, ddb_client=ddb)

    assert [(c.sku, c.before, c.after, c.reserved) for c in changes] == [("SKU-MUG", 7, 10, 3)]
    level = store.get_stock("SKU-MUG")
    assert level is not None and (level.available, level.reserved) == (10, 3)


def test_dry_run_writes_nothing(ddb: object) -> None:
    changes = seed_stock({"SKU-MUG": 10}, table=TABLE, ddb_client=ddb, dry_run=True)

    assert [(c.before, c.after) for c in changes] == [(None, 10)]
    assert InventoryStore(inventory_table=TABLE, ddb_client=ddb).get_stock("SKU-MUG") is None


def test_cli_seeds_the_file_and_prints_what_it_did(
    ddb: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    levels = tmp_path / "stock.json"
    levels.write_text(json.dumps({"SKU-A": 5, "SKU-B": 2}))

    code = main(["--table", TABLE, "--file", str(levels), "--region", "us-east-1"])

    assert code == 0
    out = capsys.readouterr().out
    assert "set SKU#SKU-A: available 5 (new; reserved 0)" in out
    assert "2 SKU(s) set in orders-inventory" in out
    stock = InventoryStore(inventory_table=TABLE, ddb_client=ddb).get_stock("SKU-B")
    assert stock is not None and stock.available == 2


@pytest.mark.parametrize(
    "document",
    [{}, [], {"SKU-A": -1}, {"SKU-A": 1.5}, {"SKU-A": "5"}, {"bad sku": 1}, {"SKU-A": True}],
    ids=["empty", "list", "negative", "fraction", "string", "bad-sku", "bool"],
)
def test_invalid_seed_file_is_refused_with_exit_2_and_nothing_written(
    ddb: object, tmp_path: Path, document: object, capsys: pytest.CaptureFixture[str]
) -> None:
    levels = tmp_path / "stock.json"
    levels.write_text(json.dumps(document))

    assert main(["--table", TABLE, "--file", str(levels), "--region", "us-east-1"]) == 2
    assert "error:" in capsys.readouterr().err
    assert ddb.scan(TableName=TABLE)["Items"] == []  # type: ignore[attr-defined]


def test_the_demo_seed_file_is_valid() -> None:
    levels = load_levels(DEFAULT_FILE)
    assert levels and all(level >= 0 for level in levels.values())
    with pytest.raises(SeedError):
        load_levels(DEFAULT_FILE.with_name("missing.json"))


def test_against_the_local_sandbox_it_needs_no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    local = argparse.Namespace(endpoint_url="http://127.0.0.1:4566", region=None)
    assert _connection(local) == {
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    # Anywhere else the AWS environment decides: no invented region or credentials.
    remote = argparse.Namespace(endpoint_url=None, region=None)
    assert _connection(remote) == {}
    assert _connection(argparse.Namespace(endpoint_url=None, region="eu-west-1")) == {
        "region_name": "eu-west-1"
    }


def test_an_unknown_table_is_a_clear_error_with_exit_2(
    ddb: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--table", "no-such-table"]) == 2
    assert "could not seed no-such-table" in capsys.readouterr().err
