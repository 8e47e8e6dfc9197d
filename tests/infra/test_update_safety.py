"""A second `cdk deploy` succeeds and replaces nothing stateful: the update-time rules
(infra/update_safety.py) checked on two synths, and on every stage's synth against the manifest."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from infra import update_safety
from infra.config import CDK_JSON, load_stage_config
from infra.constructs import layers
from infra.update_safety import (
    changed_import_sources,
    load_manifest,
    manifest_findings,
    stateful_resources,
    synth_templates,
    updated_manifest,
)

# Every stage cdk.json defines is checked against the one manifest.
STAGES = sorted(json.loads(CDK_JSON.read_text())["context"]["stages"])


def _no_pip(self: layers.PipWheelBundling, output_dir: str, options: Any) -> bool:
    # The dependency layer's asset hash is taken from its lock, not from the wheels, so the templates
    # are the same without them; a changed lock's pins could not be installed anyway.
    (Path(output_dir) / "python").mkdir(parents=True, exist_ok=True)
    return True


@pytest.fixture(scope="module")
def changed_code_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The app synthesized after a one-line change to the kernel and one to the dependency lock."""
    root = tmp_path_factory.mktemp("changed")
    kernel = root / "relay"
    shutil.copytree(layers.KERNEL_SOURCE, kernel, ignore=shutil.ignore_patterns("__pycache__"))
    init = kernel / "python" / "relay" / "__init__.py"
    init.write_text(init.read_text() + "\nCHANGED_BY_THE_TWO_SYNTH_TEST = True\n")
    dependencies = root / "dependencies"
    shutil.copytree(layers.DEPENDENCY_SOURCE, dependencies, ignore=shutil.ignore_patterns("python"))
    lock = dependencies / "requirements.txt"
    lines = lock.read_text().splitlines()
    pin = next(i for i, line in enumerate(lines) if line and not line.startswith(("#", " ")))
    lines[pin] = lines[pin].replace("==", "==0.0.0.dev0+", 1)  # another version of the same package
    lock.write_text("\n".join(lines) + "\n")

    patch = pytest.MonkeyPatch()
    patch.setattr(layers, "KERNEL_SOURCE", kernel)
    patch.setattr(layers, "DEPENDENCY_SOURCE", dependencies)
    patch.setattr(layers.PipWheelBundling, "try_bundle", _no_pip)
    try:
        return synth_templates()[0]
    finally:
        patch.undo()


def _layer_keys(templates: dict[str, dict[str, Any]]) -> set[str]:
    return {
        resource["Properties"]["Content"]["S3Key"]
        for template in templates.values()
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::LayerVersion"
    }


def test_a_kernel_and_lock_change_changes_no_imported_export(app_templates, changed_code_templates):
    # The change reaches the layers (both assets are new)...
    assert _layer_keys(app_templates).isdisjoint(_layer_keys(changed_code_templates))
    # ...and no export another stack imports changes with it.
    assert changed_import_sources(app_templates, changed_code_templates) == []


def test_the_two_synth_check_names_an_exported_layer_that_a_code_change_replaces(tmp_path):
    # What the app did before each stack built its own layers: core's layer, used by a service stack.
    def app_with_a_shared_layer(content: str) -> dict[str, dict[str, Any]]:
        source = tmp_path / content / "python"
        source.mkdir(parents=True)
        (source / "kernel.py").write_text(content)
        app = App()
        core = Stack(app, "core")
        layer = lambda_.LayerVersion(core, "KernelLayer", code=lambda_.Code.from_asset(str(source.parent)))
        service = Stack(app, "service")
        lambda_.Function(
            service,
            "Fn",
            runtime=layers.RUNTIME,
            handler="x.handler",
            code=lambda_.Code.from_inline("def handler(e, c): pass"),
            layers=[layer],
        )
        return {s.stack_name: s.template for s in app.synth().stacks}

    (problem,) = changed_import_sources(app_with_a_shared_layer("v1"), app_with_a_shared_layer("v2"))
    assert "(AWS::Lambda::LayerVersion), whose definition changed" in problem
    assert problem.startswith("export core:ExportsOutputRefKernelLayer")


def test_no_stack_exports_a_layer(app_templates):
    exported = {
        source
        for template in app_templates.values()
        for output in template.get("Outputs", {}).values()
        if "Export" in output
        for source in update_safety.referenced_ids(output["Value"])
        if template["Resources"].get(source, {}).get("Type") == "AWS::Lambda::LayerVersion"
    }
    assert exported == set()


# -- the manifest ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", STAGES)
def test_every_stateful_resource_keeps_its_logical_id_name_and_type(stage, app_templates):
    # app_templates is the default stage's synth; the others are synthesized here.
    if stage == "dev":
        templates, prefix = app_templates, load_stage_config(App()).prefix
    else:
        templates, prefix = synth_templates(stage)
    assert manifest_findings(load_manifest(), stateful_resources(templates, prefix)) == []


def _table(logical_id: str = "OrdersTable1", **extra: Any) -> dict[str, Any]:
    return {
        "stack": "{prefix}-orders",
        "logicalId": logical_id,
        "type": "AWS::DynamoDB::Table",
        "name": "{prefix}-orders-orders",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "indexes": {"by-customer": [{"AttributeName": "customer", "KeyType": "HASH"}]},
        **extra,
    }


def _manifest(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"resources": list(resources), "changes": []}


def test_a_renamed_construct_id_is_a_deleted_table_and_an_unrecorded_one():
    findings = manifest_findings(_manifest(_table()), [_table("OrdersTableRenamed2")])
    assert len(findings) == 2
    assert "{prefix}-orders/OrdersTable1 (AWS::DynamoDB::Table) is gone from the synth" in findings[0]
    assert "would DELETE it and its data" in findings[0]
    assert "OrdersTableRenamed2 (AWS::DynamoDB::Table) is not in stateful-resources.json" in findings[1]


def test_a_retyped_renamed_or_rekeyed_resource_is_a_replacement():
    retyped = dict(_table(), type="AWS::DynamoDB::GlobalTable")
    assert "is now a AWS::DynamoDB::GlobalTable" in manifest_findings(_manifest(_table()), [retyped])[0]
    renamed = dict(_table(), name="{prefix}-orders-orders-v2")
    (finding,) = manifest_findings(_manifest(_table()), [renamed])
    assert "name changes" in finding and "fails the update if it is named" in finding
    rekeyed = dict(_table(), KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
    (finding,) = manifest_findings(_manifest(_table()), [rekeyed])
    assert "KeySchema changes" in finding


def test_one_index_added_or_removed_per_table_is_allowed_two_are_not():
    one_more = copy.deepcopy(_table())
    one_more["indexes"]["by-status"] = [{"AttributeName": "status", "KeyType": "HASH"}]
    assert manifest_findings(_manifest(_table()), [one_more]) == []
    assert manifest_findings(_manifest(_table()), [dict(_table(), indexes={})]) == []
    two_more = copy.deepcopy(one_more)
    two_more["indexes"]["by-date"] = [{"AttributeName": "date", "KeyType": "HASH"}]
    (finding,) = manifest_findings(_manifest(_table()), [two_more])
    assert "2 global secondary index changes in one update (+by-date, +by-status)" in finding
    # A changed index key is a delete and a create: two changes.
    rekeyed = dict(_table(), indexes={"by-customer": [{"AttributeName": "email", "KeyType": "HASH"}]})
    assert "(+by-customer, -by-customer)" in manifest_findings(_manifest(_table()), [rekeyed])[0]


def test_writing_the_manifest_records_each_change_with_its_reason_and_refuses_what_no_deploy_may_do():
    with pytest.raises(ValueError, match="say why"):
        updated_manifest(_manifest(_table()), [], reason="")
    written = updated_manifest(_manifest(_table()), [], reason="orders moved to the v2 table (backfilled)")
    assert written["resources"] == []
    assert written["changes"][-1]["what"] == ["removed {prefix}-orders/OrdersTable1"]
    assert written["changes"][-1]["reason"] == "orders moved to the v2 table (backfilled)"
    assert updated_manifest(_manifest(_table()), [_table()], reason="")["changes"] == []
    rekeyed = dict(_table(), KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
    with pytest.raises(ValueError, match="key schema changes"):
        updated_manifest(_manifest(_table()), [rekeyed], reason="why not")
    two = dict(_table(), indexes={"a": [], "b": []})
    with pytest.raises(ValueError, match="allows one per table"):
        updated_manifest(_manifest(_table()), [two], reason="why not")


def test_every_recorded_change_has_a_reason():
    assert all(change["reason"].strip() for change in load_manifest()["changes"])
    unexplained = dict(_manifest(), changes=[{"what": ["removed x"], "reason": " "}])
    assert manifest_findings(unexplained, []) == ["manifest change ['removed x'] has no reason"]
