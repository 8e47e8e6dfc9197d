"""Update expressions validated without moto's deep copy of the parsed tree (patch 13).

moto's behaviour: the update-expression validator, ``Validator.__init__``
(moto/dynamodb/parsing/validators.py), deep-copies the AST it is given before rewriting it in place:
9 % of the emulator's CPU in a chaos run (py-spy), twice the parse's 4 %. Each AST is parsed
(``UpdateExpressionParser.make`` in moto/dynamodb/parsing/expressions.py) for one UpdateItem, or one
action of a transaction, and validated once, or twice when the update creates its item: the copy only
protects the tree for that second validation.

AWS's behaviour: performance only: AWS's behaviour is unchanged. Every validation still starts from a
pristine tree: the patch hands the first validation the parsed AST itself and any later one a fresh
parse of the same expression, so answers, errors and written items are moto's.

Upstream: yes. A copy of every update expression's tree per request, for a second validation that only
updates creating their item need, is avoidable within moto's validator and its two callers.
``docs/upstream/update_asts.md``.

Patches: moto 5.2.5, ``UpdateExpressionParser.make`` and ``Validator.__init__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 13; returns a function that removes it."""
    import inspect

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    original_make = UpdateExpressionParser.__dict__["make"]
    original_init = validators.Validator.__init__
    signature = inspect.signature(original_init)

    def parse(expression_str: str) -> Any:
        ast = original_make.__func__(UpdateExpressionParser, expression_str)
        ast.relay_source = expression_str  # parsed here: its validations can skip the deep copy
        return ast

    def make(cls: Any, expression_str: str) -> Any:
        return (
            parse(expression_str)
            if cls is UpdateExpressionParser
            else original_make.__func__(cls, expression_str)
        )

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        expression = bound.arguments["expression"]
        source = getattr(expression, "relay_source", None)
        if source is None:  # an AST from elsewhere: moto's own copy
            original_init(self, *args, **kwargs)
            return
        # What moto's __init__ does, without its deepcopy: the first validation takes the parsed tree
        # itself (and rewrites it), a later one a fresh parse of the same expression.
        self.expression_attribute_names = bound.arguments["expression_attribute_names"]
        self.expression_attribute_values = bound.arguments["expression_attribute_values"]
        self.item = bound.arguments["item"]
        self.table = bound.arguments["table"]
        self.processors = self.get_ast_processors()
        if getattr(expression, "relay_validated", False):
            self.node_to_validate = parse(source)
        else:
            expression.relay_validated = True
            self.node_to_validate = expression

    def remove() -> None:
        UpdateExpressionParser.make = original_make
        validators.Validator.__init__ = original_init  # type: ignore[method-assign]

    UpdateExpressionParser.make = classmethod(make)
    validators.Validator.__init__ = init  # type: ignore[method-assign]
    return remove
