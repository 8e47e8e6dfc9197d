"""``ops migrate``'s passes run on a handler test's world: its tables under the names ``ops`` gives a
stage's, and the functions' environment from the template (what the passes read from the functions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ops.app import App
from ops.migrate import Context, passes, run_pass


@dataclass(frozen=True)
class WorldApp(App):
    """An ``App`` whose tables are the world's (``tables``: (service, short name) -> table)."""

    tables: Mapping[tuple[str, str], str] = field(default_factory=dict, compare=False)

    def name(self, service: str, short: str) -> str:
        return self.tables.get((service, short), f"missing-{service}-{short}")


def migrate(
    app: WorldApp, service: str, environments: Mapping[str, dict[str, str]], *, dry_run: bool = False
) -> dict[str, dict[str, int]]:
    """Every pass of ``service`` once, from the top; the outcomes per pass."""
    ctx = Context(app, dry_run=dry_run, rate=0, environments=dict(environments))
    return {step.name: dict(run_pass(ctx, step, {})) for step in passes() if step.service == service}
