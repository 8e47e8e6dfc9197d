"""Retention by stage: what `cdk destroy` keeps. A disposable stage (dev) deletes everything with its
stacks; any other stage (prod) RETAINS what holds data or evidence: DLQs (parked messages), the claim-check
and analytics buckets (and their access logs), log groups, tables and the alarm topic's KMS key."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, RemovalPolicy

from infra.app_builder import build_app
from infra.config import load_stage_config, parse_stage_config
from infra.stacks.base import removal_policy

POLICIES = ("DeletionPolicy", "UpdateReplacePolicy")


@pytest.fixture(scope="module")
def prod_templates() -> dict[str, dict[str, Any]]:
    """The prod app as `npx cdk synth -c stage=prod` builds it (cdk-nag + guards on: synth raises on any
    finding)."""
    app = App(context={"aws:cdk:enable-path-metadata": True, "stage": "prod"})
    build_app(app, nag=True)
    return {stack.stack_name: stack.template for stack in app.synth().stacks}


@pytest.fixture(scope="module", params=["dev", "prod"])
def stage(request, app_templates, prod_templates) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, app_templates if request.param == "dev" else prod_templates


def _kept(stage_name: str) -> str:
    return "Retain" if stage_name == "prod" else "Delete"


def _of(templates, kind, keep=lambda props: True):
    found = [
        (f"{name}/{logical_id}", resource)
        for name, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == kind and keep(resource.get("Properties", {}))
    ]
    assert found, f"no {kind} to check"
    return found


def _policies(resource: dict[str, Any]) -> dict[str, str | None]:
    return {policy: resource.get(policy) for policy in POLICIES}


def _assert_all(found, expected: str) -> None:
    wrong = {path: _policies(r) for path, r in found if _policies(r) != dict.fromkeys(POLICIES, expected)}
    assert not wrong, f"expected {expected}: {wrong}"


def test_the_stages_are_what_cdk_json_says():
    assert load_stage_config(App(context={"stage": "dev"})).disposable is True
    assert load_stage_config(App(context={"stage": "prod"})).disposable is False


def test_dead_letter_queues_follow_the_stage(stage):
    name, templates = stage
    dlqs = _of(templates, "AWS::SQS::Queue", lambda props: "RedrivePolicy" not in props)
    # 14 reliable queues' DLQs, 3 topics' undeliverable, 2 outbox streams, the scores schedule and its
    # target, the payments sweep schedule, the shipping and points bus rules' targets.
    assert len(dlqs) == 24
    _assert_all(dlqs, _kept(name))


def test_claim_check_and_analytics_buckets_and_their_access_logs_follow_the_stage(stage):
    name, templates = stage
    buckets = _of(templates, "AWS::S3::Bucket")
    paths = {path.split("/")[0] for path, _ in buckets}
    assert len(buckets) == 4 and paths == {f"relay-{name}-payments", f"relay-{name}-orders"}
    _assert_all(buckets, _kept(name))


def test_log_groups_follow_the_stage(stage):
    name, templates = stage
    _assert_all(_of(templates, "AWS::Logs::LogGroup"), _kept(name))


def test_the_alarm_key_follows_the_stage(stage):
    name, templates = stage
    _assert_all(_of(templates, "AWS::KMS::Key"), _kept(name))


def test_tables_follow_the_stage(stage):
    name, templates = stage
    _assert_all(_of(templates, "AWS::DynamoDB::Table"), _kept(name))


def test_work_queues_are_deleted_with_their_stack_in_every_stage(stage):
    # What consumers gave up on is kept, in the DLQ; work in flight goes with the consumers.
    _, templates = stage
    _assert_all(_of(templates, "AWS::SQS::Queue", lambda props: "RedrivePolicy" in props), "Delete")


def test_a_stage_that_does_not_say_it_is_disposable_retains():
    config = parse_stage_config("qa", {}, {"qa": {}})
    assert config.disposable is False
    assert removal_policy(config) == RemovalPolicy.RETAIN
    disposable = parse_stage_config("sandbox", {}, {"sandbox": {"disposable": True}})
    assert removal_policy(disposable) == RemovalPolicy.DESTROY
