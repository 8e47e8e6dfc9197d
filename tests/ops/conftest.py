"""Fixtures of the ops CLI tests; the worlds and helpers are in world.py."""

from tests.ops.world import _no_long_polling, audit_file, deployed, payments, sandbox_app

__all__ = ["_no_long_polling", "audit_file", "deployed", "payments", "sandbox_app"]
