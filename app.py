#!/usr/bin/env python3
"""Relay CDK app: `npx cdk synth -c stage=dev` (or `make synth`)."""

import sys

from aws_cdk import App

from infra.app_builder import build_app
from infra.config import ConfigError

app = App()
try:
    build_app(app)
except ConfigError as exc:
    sys.exit(f"relay: {exc}")
app.synth()
