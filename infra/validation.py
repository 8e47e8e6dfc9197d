"""Runs the reliability guards (`infra.guards`) as a CDK policy-validation plugin, beside cdk-nag.

A plugin sees the synthesized templates, so the guards judge what would be deployed; a violation fails
synth and the CDK's validation report names the construct path."""

from __future__ import annotations

import json
from pathlib import Path

import jsii
from aws_cdk import (
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
)

from infra import guards


@jsii.implements(IPolicyValidationPlugin)
class RelayGuards:
    @property
    def name(self) -> str:
        return "relay-guards"

    @property
    def version(self) -> str:
        return "1.0.0"

    @property
    def rule_ids(self) -> list[str]:
        return [
            "RELAY-VISIBILITY",
            "RELAY-MAX-RECEIVE",
            "RELAY-SNS-AWS-SQS-KEY",
            "RELAY-BATCH-FAILURES",
            "RELAY-DLQ",
            "RELAY-S3-EXPIRY",
            "RELAY-EXPORT-REPLACED",
        ]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        violations: list[PolicyViolation] = []
        for template_path in context.template_paths:
            template = json.loads(Path(template_path).read_text())
            for finding in guards.check_template(Path(template_path).name, template):
                violations.append(
                    PolicyViolation(
                        rule_name=finding.rule,
                        description=finding.message,
                        violating_resources=[
                            PolicyViolatingResource(
                                resource_logical_id=finding.logical_id,
                                template_path=template_path,
                                locations=["Properties"],
                            )
                        ],
                        severity="error",
                    )
                )
        return PolicyValidationPluginReport(success=not violations, violations=violations)
