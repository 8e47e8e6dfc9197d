"""Relay reliability kernel. Import the module for the concern you need (``relay.consumer``,
``relay.idempotency``, ...); nothing is imported eagerly here because cold start matters."""

__version__ = "0.1.0"
