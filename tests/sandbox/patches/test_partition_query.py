"""Patch 12 (``emulator.patches.partition_query``): a table Query reads its partition alone, and answers
what moto answers."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from emulator.patches import partition_query
from tests.sandbox.patches.support import installed


def test_a_table_query_reads_its_partition_alone_and_answers_what_moto_answers() -> None:
    """Every kind of Query, with and without the patch, response by response; moto lists (and sorts)
    the whole table for each Query, the patch for none; a Scan still does."""
    from moto.dynamodb.models.table import Table

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                *({"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gpk")),
                {"AttributeName": "gn", "AttributeType": "N"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-g",
                    "KeySchema": [{"AttributeName": "gpk", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {  # the deadline index's shape: a shard, and a moment to compare with
                    "IndexName": "by-g-n",
                    "KeySchema": [
                        {"AttributeName": "gpk", "KeyType": "HASH"},
                        {"AttributeName": "gn", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.create_table(
            TableName="h",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for p in range(8):
            ddb.put_item(TableName="h", Item={"pk": {"S": f"P{p}"}, "n": {"N": str(p)}})
            for r in range(12):
                item = {"pk": {"S": f"P{p}"}, "sk": {"S": f"R#{r:02d}"}, "n": {"N": str(r)}}
                if r % 3 == 0:
                    item["gpk"], item["gn"] = {"S": f"G{r % 2}"}, {"N": str(p % 5)}
                ddb.put_item(TableName="t", Item=item)
        queries: list[dict[str, Any]] = [
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P3"}},
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P9"}},
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
                "ExpressionAttributeValues": {":p": {"S": "P1"}, ":s": {"S": "R#0"}},
                "ScanIndexForward": False,
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
                "ExpressionAttributeValues": {
                    ":p": {"S": "P2"},
                    ":a": {"S": "R#03"},
                    ":b": {"S": "R#08"},
                    ":n": {"N": "4"},
                },
                "FilterExpression": "n > :n",
                "ProjectionExpression": "sk, n",
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P4"}},
                "Select": "COUNT",
            },
            {
                "TableName": "t",
                "IndexName": "by-g",
                "KeyConditionExpression": "gpk = :g",
                "ExpressionAttributeValues": {":g": {"S": "G0"}},
            },
            {
                "TableName": "t",
                "IndexName": "by-g-n",
                "KeyConditionExpression": "gpk = :g AND gn <= :n",
                "ExpressionAttributeValues": {":g": {"S": "G1"}, ":n": {"N": "2"}},
            },
            {
                "TableName": "h",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P5"}},
            },
        ]

        def run_all() -> list[Any]:
            answers: list[Any] = []
            for query in queries:
                answers.append({k: v for k, v in ddb.query(**query).items() if k != "ResponseMetadata"})
                pages, start = [], None  # the same query a page of 5 at a time
                while True:
                    extra = {"ExclusiveStartKey": start} if start else {}
                    page = ddb.query(**query, Limit=5, **extra)
                    pages.append((page.get("Items"), page.get("Count")))
                    start = page.get("LastEvaluatedKey")
                    if not start:
                        break
                answers.append(pages)
            answers.append(ddb.scan(TableName="t", Limit=7)["Items"])
            return answers

        listed: list[str] = []  # every listing of a whole table (sorted, in moto)
        whole_table = Table.all_items

        def counted(table: Any) -> Any:
            listed.append(table.name)
            return whole_table(table)

        Table.all_items = counted  # type: ignore[method-assign]
        try:
            unpatched = run_all()
            del listed[:]
            ddb.query(**queries[0])
            ddb.query(**queries[-1])
            ddb.query(**queries[-2])
            assert listed == ["t", "h", "t"]  # moto: each query lists its whole table
            with installed(partition_query.install):
                patched = run_all()
                del listed[:]
                ddb.query(**queries[0])
                ddb.query(**queries[-1])
                assert listed == []  # table queries list no whole table
                ddb.query(**queries[-2])  # an index query lists every item, unsorted
                assert listed == []
                ddb.scan(TableName="h")
                assert listed == ["h"]  # a scan keeps moto's path
        finally:
            Table.all_items = whole_table  # type: ignore[method-assign]
    assert patched == unpatched
    assert [len(a["Items"]) for a in unpatched[0:1]] == [12] and unpatched[2]["Items"] == []
    assert [i["sk"]["S"] for i in unpatched[4]["Items"]] == [
        "R#09",
        "R#08",
        "R#07",
        "R#06",
        "R#05",
        "R#04",
        "R#03",
        "R#02",
        "R#01",
        "R#00",
    ]
    assert getattr(partition_query._PARTITION, "key", None) is None
