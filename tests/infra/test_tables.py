from __future__ import annotations

from aws_cdk.assertions import Template
from stacks import build, stage_config
from stacks import table as reliable_table


def test_tables_are_on_demand_with_pitr_and_ttl(synthesized):
    tables = synthesized.resources("AWS::DynamoDB::Table")
    assert len(tables) == 2
    for table in tables.values():
        props = table["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert not synthesized.resources("AWS::DynamoDB::GlobalTable")


def test_stream_only_when_asked(synthesized):
    things = synthesized.json["Resources"][synthesized.logical_id("Things/Table/Resource")]["Properties"]
    assert things["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    idem = synthesized.json["Resources"][synthesized.logical_id("Idempotency/Table/Resource")]["Properties"]
    assert "StreamSpecification" not in idem
    assert idem["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]


def test_deletion_protection_follows_the_stage():
    _, stack = build(
        lambda s: reliable_table(s, "T", name="t"),
        config=stage_config(stage="prod", deletion_protection=True),
    )
    prod = Template.from_stack(stack).to_json()
    (table,) = [r for r in prod["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
