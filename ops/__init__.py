"""Operator command-line tools, run from the repository root with ``python -m ops.<tool>``."""
