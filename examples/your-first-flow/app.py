#!/usr/bin/env python3
"""Your first flow, as its own CDK app: Relay's `core` stack (the alarm topic, the app's bus, the parked
ledger) and the `flow` stack. Walk-through: docs/your-first-flow.md.

Synthesize it (from the repository root; cdk-nag and Relay's guards run on every synth):

    cd examples/your-first-flow && npx cdk synth -q

Run it end to end on the emulator, IAM enforced (from the repository root):

    .venv/bin/pytest -q tests/examples
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Relay's constructs and stacks (`infra`), its kernel (`relay`), and this flow's contract modules
# (`flow.settings`, `flow.events`), which the stack imports as Relay's stacks import theirs.
for path in (ROOT, ROOT / "layers" / "relay" / "python", HERE / "functions"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from aws_cdk import App, Environment, Tags, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402
from flow_stack import FlowStack  # noqa: E402

from infra.config import ConfigError, cdk_json_context, parse_stage_config  # noqa: E402
from infra.stacks.core import CoreStack  # noqa: E402
from infra.validation import RelayGuards  # noqa: E402

app = App()
# Relay's feature flags, so these templates are built as Relay's are; the stage config from this
# folder's cdk.json (a `-c stage=...` on the command line wins).
for flag, value in cdk_json_context().items():
    if flag.startswith("@aws-cdk") and app.node.try_get_context(flag) is None:
        app.node.set_context(flag, value)
context = json.loads((HERE / "cdk.json").read_text())["context"]
try:
    config = parse_stage_config(
        str(app.node.try_get_context("stage") or context["stage"]), context["defaults"], context["stages"]
    )
except ConfigError as exc:
    sys.exit(f"your-first-flow: {exc}")
env = Environment(account=config.account, region=config.region)
core = CoreStack(app, f"{config.prefix}-core", config=config, env=env)
FlowStack(app, f"{config.prefix}-flow", config=config, platform=core.platform, env=env)
Tags.of(app).add("app", "relay-your-first-flow")
Tags.of(app).add("stage", config.stage)
# cdk-nag and Relay's reliability guards on every synth, as for Relay itself.
Validations.of(app).add_plugins(AwsSolutionsChecks(app), RelayGuards())
app.synth()
