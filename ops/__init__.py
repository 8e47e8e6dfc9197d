"""Operator command-line tools, run from the repository root.

``python -m ops status|dlq|doctor`` (``ops/__main__.py``; ``python -m ops --help``) operates a stage on
AWS or in the local sandbox, on the connection and discovery of ``ops/app.py``; other modules here add
commands by defining ``register`` (see ``ops/__main__.py``). ``python -m ops.seed_stock`` loads stock
levels into the orders inventory table.
"""
