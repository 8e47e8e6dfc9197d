"""Least privilege, per function, read off the synthesized app: every resource a function's environment
names is granted to its role (else its first call is AccessDenied on AWS, as the payments API's keyed
POST was), and its role is granted nothing else: no resource its code is not told about, no ``*``.

A resource is identified by the template reference that names it (``Ref``/``GetAtt`` of a logical id, or
an ``Fn::ImportValue`` across stacks), so ``OPERATIONS_TABLE`` (a ``Ref``) and ``dynamodb:PutItem`` on
``GetAtt Table.Arn`` and ``…/index/*`` count as the same table. Besides its environment, a function may
be granted what Lambda itself uses for it: its log group, and its event source mapping's source and
on-failure destination.
"""

from __future__ import annotations

import json
from typing import Any

# The resource types whose names functions get through their environment.
NAMED_TYPES = {
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::S3::Bucket",
    "AWS::SecretsManager::Secret",
    "AWS::Events::EventBus",
}


# Actions that take no resource-level permission: AWS requires "*" for them.
RESOURCE_LESS_ACTIONS = {
    "dynamodb:ListStreams",
    # What active tracing (RelayFunction) grants every function: the segments and the daemon's telemetry.
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}

# export name -> the exporting stack's resources it names ("<stack>/<logical id>"), set per test run.
EXPORTS: dict[str, set[str]] = {}


def index_exports(app_templates: dict[str, dict[str, Any]]) -> None:
    for stack, template in app_templates.items():
        for output in template.get("Outputs", {}).values():
            name = output.get("Export", {}).get("Name")
            if name:
                EXPORTS[name] = {f"{stack}/{r}" for r in references(output["Value"], template["Resources"])}


def references(value: Any, resources: dict[str, Any]) -> set[str]:
    """The resources (logical ids of NAMED_TYPES, or ``<stack>/<logical id>`` across an
    ``Fn::ImportValue``) that ``value`` refers to."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and value["Ref"] in resources:
            found.add(value["Ref"])
        elif "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"][0]
            if target in resources:
                found.add(target)
        elif "Fn::ImportValue" in value:
            name = value["Fn::ImportValue"]
            found |= (
                EXPORTS.get(name, {f"unresolved import {json.dumps(name)}"})
                if isinstance(name, str)
                else {f"unresolved import {json.dumps(name)}"}
            )
        else:
            for inner in value.values():
                found |= references(inner, resources)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner, resources)
    kinds = {*NAMED_TYPES, "AWS::Logs::LogGroup"}
    return {r for r in found if r not in resources or resources[r]["Type"] in kinds}


def functions(app_templates: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    index_exports(app_templates)
    return [
        (stack, logical_id, template)
        for stack, template in sorted(app_templates.items())
        for logical_id, resource in sorted(template["Resources"].items())
        if resource["Type"] == "AWS::Lambda::Function"
    ]


def grants_of(template: dict[str, Any], function_id: str) -> tuple[set[str], list[str]]:
    """(resources granted to the function's role, statements granting ``*``)."""
    resources = template["Resources"]
    role = resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    granted: set[str] = set()
    wildcards: list[str] = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            targets = statement["Resource"]
            targets = targets if isinstance(targets, list) else [targets]
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "*" in targets and not set(actions) <= RESOURCE_LESS_ACTIONS:
                wildcards.append(f"{logical_id}: {actions} on *")
            granted |= references(targets, resources)
    return granted, wildcards


def lambda_uses(template: dict[str, Any], function_id: str) -> set[str]:
    """What Lambda itself uses with the function's role: its log group, its mappings' sources and
    on-failure destinations."""
    resources = template["Resources"]
    function = resources[function_id]["Properties"]
    used = references(function.get("LoggingConfig", {}), resources)
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        props = resource["Properties"]
        if props["FunctionName"] != {"Ref": function_id}:
            continue
        used |= references(props["EventSourceArn"], resources)
        used |= references(props.get("DestinationConfig", {}), resources)
    return used


def _cases(app_templates: dict[str, dict[str, Any]]) -> list[tuple[str, str, set[str], set[str], set[str]]]:
    cases = []
    for stack, function_id, template in functions(app_templates):
        env = template["Resources"][function_id]["Properties"].get("Environment", {}).get("Variables", {})
        named = references(env, template["Resources"])
        granted, _ = grants_of(template, function_id)
        cases.append((stack, function_id, named, granted, lambda_uses(template, function_id)))
    return cases


def test_the_app_has_functions_to_check(app_templates: dict[str, dict[str, Any]]) -> None:
    assert len(functions(app_templates)) >= 16


def test_every_resource_a_function_is_told_about_is_granted_to_it(app_templates: dict[str, Any]) -> None:
    missing = [
        f"{stack}/{function_id}: {sorted(named - granted)}"
        for stack, function_id, named, granted, _ in _cases(app_templates)
        if named - granted
    ]
    assert not missing, "named in the environment but not granted (AccessDenied on AWS):\n" + "\n".join(
        missing
    )


def test_no_function_is_granted_a_resource_it_is_not_told_about(app_templates: dict[str, Any]) -> None:
    extra = [
        f"{stack}/{function_id}: {sorted(granted - named - uses)}"
        for stack, function_id, named, granted, uses in _cases(app_templates)
        if granted - named - uses
    ]
    assert not extra, "granted but never named to the function (least privilege):\n" + "\n".join(extra)


def test_no_function_role_grants_a_wildcard_resource(app_templates: dict[str, Any]) -> None:
    wildcards = [
        f"{stack}/{function_id}: {w}"
        for stack, function_id, template in functions(app_templates)
        for w in grants_of(template, function_id)[1]
    ]
    assert not wildcards, "\n".join(wildcards)


def test_consumers_may_read_and_put_in_the_parked_ledger_and_nothing_else(
    app_templates: dict[str, Any],
) -> None:
    """A poison message delivered twice is parked once: the consumer reads the ledger for its delivery
    before parking (GetItem) and records the parking (PutItem); it needs nothing else there."""
    seen = 0
    for template in app_templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                if "ParkedLedger" not in json.dumps(statement.get("Resource")):
                    continue
                seen += 1
                actions = statement["Action"]
                assert sorted([actions] if isinstance(actions, str) else actions) == [
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                ], statement
    assert seen >= 10
