from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path.insert(0, str(Path(__file__).parent))

from aws_cdk.assertions import Template
from stacks import build, showcase


class Synthesized:
    """The showcase app synthesized once (with cdk-nag on): templates by stack name."""

    def __init__(self) -> None:
        app, stack = build(showcase, nag=True)
        self.assembly = app.synth()
        self.stack = stack
        self.template = Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == kind}

    def logical_id(self, path_suffix: str) -> str:
        matches = [
            k
            for k, v in self.json["Resources"].items()
            if v.get("Metadata", {}).get("aws:cdk:path", "").endswith(path_suffix)
        ]
        assert len(matches) == 1, f"{path_suffix}: {matches}"
        return matches[0]


@pytest.fixture(scope="session")
def synthesized() -> Synthesized:
    return Synthesized()


@pytest.fixture(scope="session")
def app_templates() -> dict[str, dict[str, Any]]:
    """The whole app as `make synth` builds it (cdk-nag + guards on; synth raises on any finding)."""
    from aws_cdk import App

    from infra.app_builder import build_app

    app = App(context={"aws:cdk:enable-path-metadata": True})
    build_app(app, nag=True)
    return {stack.stack_name: stack.template for stack in app.synth().stacks}
