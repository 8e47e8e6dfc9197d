"""Update-time rules that a single template cannot show: what a second `cdk deploy` would do.

A fresh sandbox, synth, cfn-lint, cdk-nag and checkov each see one template of one version. CloudFormation
applies the *change* between two versions, and refuses or destroys on rules of its own:

- an export another stack imports cannot change ("Cannot update export ... as it is in use by ...");
  `changed_import_sources` compares two synths of the app and names every imported export whose source
  changed (tests/infra/test_update_safety.py synthesizes twice, the second time with the kernel and the
  dependency lock changed by one line);
- a renamed construct id is a new logical id: CloudFormation creates the new resource and deletes the old
  one, and with a table, a queue or a bucket goes its data or its in-flight messages. A named resource that
  must be replaced fails the update outright (the name is taken). `infra/stateful-resources.json` records
  every stateful resource (its stack, logical id, type, name and the properties whose change replaces it);
  `manifest_findings` names what a synth dropped, renamed, re-typed or would replace;
- one update may create or delete only one global secondary index per table: `manifest_findings` allows
  one index added or removed per table against the manifest, and no key-schema change.

The manifest is written from a synth by `make stateful-manifest REASON="..."` (`python -m
infra.update_safety`), which records what changed and why under `changes`, and refuses a change the rules
above forbid. Stack names and resource names are stored with the stage prefix as `{prefix}`, so one
manifest is checked against every stage in cdk.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.guards import referenced_ids

MANIFEST = Path(__file__).resolve().parent / "stateful-resources.json"

# Every type that holds data or messages, with the property that names it (if any) and the properties
# whose change makes CloudFormation replace it (CloudFormation resource reference, "Update requires:
# Replacement").
STATEFUL_TYPES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "AWS::DynamoDB::Table": ("TableName", ("KeySchema",)),
    "AWS::DynamoDB::GlobalTable": ("TableName", ("KeySchema",)),
    "AWS::SQS::Queue": ("QueueName", ("FifoQueue",)),
    "AWS::S3::Bucket": ("BucketName", ()),
    "AWS::SecretsManager::Secret": ("Name", ()),
    "AWS::KMS::Key": (None, ("KeySpec",)),
    "AWS::Logs::LogGroup": ("LogGroupName", ()),
}
MAX_INDEX_CHANGES_PER_UPDATE = 1

Templates = Mapping[str, Mapping[str, Any]]


# -- exports -------------------------------------------------------------------------------------------


def _import_names(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if "Fn::ImportValue" in value and isinstance(value["Fn::ImportValue"], str):
            yield value["Fn::ImportValue"]
        for item in value.values():
            yield from _import_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _import_names(item)


def _definition(resource: Mapping[str, Any]) -> dict[str, Any]:
    # What CloudFormation deploys; Metadata (the asset path, the construct path) is not part of it.
    return {k: v for k, v in resource.items() if k != "Metadata"}


def imported_export_sources(templates: Templates) -> dict[str, dict[str, Any]]:
    """Every export some stack imports: its value and the definitions of the resources it is taken from."""
    imported = {name for template in templates.values() for name in _import_names(template)}
    sources: dict[str, dict[str, Any]] = {}
    for stack, template in templates.items():
        resources = template.get("Resources", {})
        for output in (template.get("Outputs") or {}).values():
            name = output.get("Export", {}).get("Name")
            if name in imported:
                value = output.get("Value")
                sources[name] = {
                    "stack": stack,
                    "value": value,
                    "resources": {
                        ref: _definition(resources[ref]) for ref in referenced_ids(value) if ref in resources
                    },
                }
    return sources


def changed_import_sources(before: Templates, after: Templates) -> list[str]:
    """Each export imported in `after` whose value or source resource differs from `before`: an update
    CloudFormation refuses while the importing stacks still use it."""
    old, new = imported_export_sources(before), imported_export_sources(after)
    problems = []
    for name, source in sorted(new.items()):
        previous = old.get(name)
        if previous is None:
            continue
        if previous["value"] != source["value"]:
            problems.append(f"export {name} ({source['stack']}): its value changed")
        for ref, definition in source["resources"].items():
            if previous["resources"].get(ref) != definition:
                kind = definition.get("Type")
                problems.append(
                    f"export {name} ({source['stack']}) is taken from {ref} ({kind}), whose definition "
                    "changed: if CloudFormation replaces it, the export changes while another stack "
                    "imports it and the update fails"
                )
    return problems


# -- the stateful-resource manifest ---------------------------------------------------------------------


def _generic(value: Any, prefix: str) -> Any:
    text = json.dumps(value, sort_keys=True).replace(prefix, "{prefix}")
    return json.loads(text)


def _indexes(props: Mapping[str, Any]) -> dict[str, Any]:
    return {
        index["IndexName"]: index.get("KeySchema")
        for index in props.get("GlobalSecondaryIndexes") or []
        if isinstance(index, dict)
    }


def stateful_resources(templates: Templates, prefix: str) -> list[dict[str, Any]]:
    """Every stateful resource of a synth, stage-independent (`{prefix}` for the stage prefix)."""
    found = []
    for stack, template in templates.items():
        for logical_id, resource in (template.get("Resources") or {}).items():
            kind = resource.get("Type")
            if kind not in STATEFUL_TYPES:
                continue
            name_prop, replacing = STATEFUL_TYPES[kind]
            props = resource.get("Properties") or {}
            entry: dict[str, Any] = {"stack": _generic(stack, prefix), "logicalId": logical_id, "type": kind}
            if name_prop and name_prop in props:
                entry["name"] = _generic(props[name_prop], prefix)
            for prop in replacing:
                if prop in props:
                    entry[prop] = _generic(props[prop], prefix)
            if kind in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
                entry["indexes"] = _indexes(props)
            found.append(entry)
    return sorted(found, key=lambda e: (e["stack"], e["logicalId"]))


def _key(entry: Mapping[str, Any]) -> tuple[str, str]:
    return (str(entry["stack"]), str(entry["logicalId"]))


def _index_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each index CloudFormation would create or delete (a changed key schema is a delete and a create)."""
    changes = [f"-{n}" for n in before if n not in after] + [f"+{n}" for n in after if n not in before]
    for name in before.keys() & after.keys():
        if before[name] != after[name]:
            changes += [f"-{name}", f"+{name}"]
    return sorted(changes)


def manifest_findings(manifest: Mapping[str, Any], current: list[dict[str, Any]]) -> list[str]:
    """What a deploy of `current` over the resources `manifest` records would replace, delete or refuse."""
    recorded = {_key(e): e for e in manifest["resources"]}
    now = {_key(e): e for e in current}
    findings = []
    for key, entry in sorted(recorded.items()):
        where = f"{key[0]}/{key[1]} ({entry['type']})"
        new = now.get(key)
        if new is None:
            findings.append(
                f"{where} is gone from the synth: a deploy would DELETE it and its data (a renamed construct "
                "id is a new logical id). Restore the construct id, or record the migration: "
                'make stateful-manifest REASON="..."'
            )
            continue
        if new["type"] != entry["type"]:
            findings.append(f"{where} is now a {new['type']}: a deploy would replace it and lose its data")
            continue
        for prop in ("name", *STATEFUL_TYPES[entry["type"]][1]):
            if new.get(prop) != entry.get(prop):
                findings.append(
                    f"{where}: {prop} changes from {json.dumps(entry.get(prop))} to "
                    f"{json.dumps(new.get(prop))}; CloudFormation replaces the resource "
                    "(and fails the update if it is named)"
                )
        changes = _index_changes(entry.get("indexes") or {}, new.get("indexes") or {})
        if len(changes) > MAX_INDEX_CHANGES_PER_UPDATE:
            findings.append(
                f"{where}: {len(changes)} global secondary index changes in one update "
                f"({', '.join(changes)}); DynamoDB allows {MAX_INDEX_CHANGES_PER_UPDATE} per table per "
                "update: deploy them one at a time, updating the manifest between deploys"
            )
    for key in sorted(now.keys() - recorded.keys()):
        findings.append(
            f"{key[0]}/{key[1]} ({now[key]['type']}) is not in {MANIFEST.name}: record it "
            '(make stateful-manifest REASON="...") so a later rename cannot replace it unnoticed'
        )
    for change in manifest.get("changes", []):
        if not str(change.get("reason", "")).strip():
            findings.append(f"manifest change {change.get('what')} has no reason")
    return findings


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def updated_manifest(
    previous: Mapping[str, Any] | None, current: list[dict[str, Any]], reason: str
) -> dict[str, Any]:
    """The manifest for `current`, with each difference from `previous` recorded under `changes` with
    `reason`. Refuses (ValueError) what no single deploy may do: a key-schema change or more than one
    index change per table."""
    before = {_key(e): e for e in (previous or {}).get("resources", [])}
    now = {_key(e): e for e in current}
    what = []
    for key in sorted(before.keys() | now.keys()):
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        label = f"{key[0]}/{key[1]}"
        if old is None:
            what.append(f"added {label}")
        elif new is None:
            what.append(f"removed {label}")
        else:
            if old.get("KeySchema") != new.get("KeySchema"):
                raise ValueError(f"{label}: its key schema changes; that replaces the table and its data")
            indexes = _index_changes(old.get("indexes") or {}, new.get("indexes") or {})
            if len(indexes) > MAX_INDEX_CHANGES_PER_UPDATE:
                raise ValueError(f"{label}: {', '.join(indexes)} at once; DynamoDB allows one per table")
            what.append(f"changed {label}" + (f" ({', '.join(indexes)})" if indexes else ""))
    if what and not reason.strip():
        raise ValueError("the stateful resources change; say why (the migration it needs) with REASON=...")
    history: list[dict[str, Any]] = list((previous or {}).get("changes", []))
    if what:
        history.append({"date": datetime.now(UTC).date().isoformat(), "what": what, "reason": reason.strip()})
    return {
        "about": "Every stateful resource of the app (infra/update_safety.py): a synth that drops, renames, "
        "re-types or would replace one fails tests/infra/test_update_safety.py.",
        "resources": current,
        "changes": history,
    }


def synth_templates(stage: str = "dev") -> tuple[dict[str, dict[str, Any]], str]:
    """The app's templates for `stage`, synthesized in process (guards on, cdk-nag off), and its prefix."""
    from aws_cdk import App

    from infra.app_builder import build_app
    from infra.config import load_stage_config

    app = App(context={"aws:cdk:enable-path-metadata": True, "stage": stage})
    config = load_stage_config(app)
    build_app(app, config, nag=False)
    return {s.stack_name: s.template for s in app.synth().stacks}, config.prefix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write infra/stateful-resources.json from a synth.")
    parser.add_argument("--reason", default="", help="why the stateful resources change (the migration)")
    args = parser.parse_args(argv)
    templates, prefix = synth_templates()
    previous = load_manifest() if MANIFEST.exists() else None
    try:
        manifest = updated_manifest(previous, stateful_resources(templates, prefix), args.reason)
    except ValueError as exc:
        print(f"stateful-manifest: refused: {exc}", file=sys.stderr)
        return 1
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{MANIFEST}: {len(manifest['resources'])} stateful resources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
