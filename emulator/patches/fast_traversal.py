"""DynamoDB expression trees walked with each node's class looked up once, not tested per node (patch 15).

moto's behaviour: every UpdateItem (and every Update action of a transaction) is validated by ten
``DepthFirstTraverser`` passes over its parsed tree (``UpdateExpressionValidator.get_ast_processors`` in
moto/dynamodb/parsing/validators.py). For each node, ``traverse_node_recursively``
(moto/dynamodb/parsing/ast_nodes.py) asks ``isinstance(node, Node)``, rebuilds the processing map twice
(``nodes_to_be_processed`` and ``process`` each call ``_processing_map()``) and tests the node against
every key with ``isinstance``; ``Node.find_clauses`` tests each child against two more classes. ``Node``
has ``abc.ABCMeta`` for metaclass, so every one of those tests goes through ``ABCMeta.__instancecheck__``.
A payment step's update (nine SET actions and a REMOVE) is a tree of about a hundred nodes: its
validation made ~5,000 ``isinstance`` calls and cost 2.4 ms of CPU, about a quarter of the emulator's
CPU in the sandbox bench (py-spy ``--gil``).

AWS's behaviour: performance only: AWS's behaviour is unchanged. The patch answers the same questions
with the same answers: whether a node is a ``Node`` and which processor (the first key of the map, in
its order, that the node's class is a subclass of) applies are properties of the node's class, so
they are worked out once per (traverser, class) and kept; the processing map is built once per
traverser instance (each validation builds new traversers, so the bound methods are the instance's
own). The order of the walk, the pre-processing hook, the calls to each processor and what is put
back in the tree are moto's, line for line. A traverser class that overrides ``nodes_to_be_processed``
or ``process`` (none in moto 5.2.5) is walked by moto's own method.

Upstream: no. Not as this patch: moto's own code would gain most from a traverser that keeps its map
and class lookups itself (a small change in ast_nodes.py), which wants a benchmark its maintainers can
run beside it; the write-up waits for one.

Patches: moto 5.2.5, ``DepthFirstTraverser.traverse_node_recursively`` and ``Node.find_clauses``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 15; returns a function that removes it."""
    import importlib

    # ast_nodes.py starts with ``# type: ignore``, so mypy sees none of its names: reach them as Any.
    ast_nodes: Any = importlib.import_module("moto.dynamodb.parsing.ast_nodes")
    DepthFirstTraverser = ast_nodes.DepthFirstTraverser
    Expression, Node = ast_nodes.Expression, ast_nodes.Node
    UpdateExpressionFunction = ast_nodes.UpdateExpressionFunction

    original_traverse = DepthFirstTraverser.traverse_node_recursively
    original_find_clauses = Node.find_clauses
    base_nodes_to_be_processed = DepthFirstTraverser.nodes_to_be_processed
    base_process = DepthFirstTraverser.process

    # class -> isinstance(instance, Node); class -> isinstance(instance, (Expression,
    # UpdateExpressionFunction)), the two questions find_clauses asks
    is_node: dict[type, bool] = {}
    descends: dict[type, bool] = {}
    # (traverser class, node class) -> the processing map's key that applies, or None
    applies: dict[tuple[type, type], Any] = {}

    def _is_node(cls: type) -> bool:
        known = is_node.get(cls)
        if known is None:
            known = is_node[cls] = issubclass(cls, Node)
        return known

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        traverser = type(self)
        if (
            traverser.nodes_to_be_processed is not base_nodes_to_be_processed
            or traverser.process is not base_process
        ):
            return original_traverse(self, node, child_id)
        cls = type(node)
        if not _is_node(cls):
            return node
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                traverse_node_recursively(self, child_node, i)
        processing = self.__dict__.get("_relay_processing_map")
        if processing is None:
            processing = self.__dict__["_relay_processing_map"] = self._processing_map()
        key = (traverser, cls)
        if key in applies:
            class_key = applies[key]
        else:
            # moto's order: the first key the node is an instance of (``process``), if any
            # (``nodes_to_be_processed`` is every key).
            class_key = applies[key] = next((k for k in processing if issubclass(cls, k)), None)
        if class_key is not None:
            node = processing[class_key](node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses: list[Any] = []
        for child in self.children or []:
            cls = type(child)
            if cls in clause_types:
                clauses.append(child)
                continue
            deeper = descends.get(cls)
            if deeper is None:
                deeper = descends[cls] = issubclass(cls, (Expression, UpdateExpressionFunction))
            if deeper:
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    traverse_node_recursively.__wrapped__ = original_traverse  # type: ignore[attr-defined]
    find_clauses.__wrapped__ = original_find_clauses  # type: ignore[attr-defined]
    DepthFirstTraverser.traverse_node_recursively = traverse_node_recursively
    Node.find_clauses = find_clauses

    def remove() -> None:
        DepthFirstTraverser.traverse_node_recursively = original_traverse
        Node.find_clauses = original_find_clauses

    return remove
