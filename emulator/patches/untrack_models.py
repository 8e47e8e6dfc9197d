"""moto's registry of every model object it creates, switched off (patch 1).

moto's behaviour: ``BaseModel.__new__`` (moto/core/common_models.py) appends every model object moto
creates to its class's ``instances_tracked`` list, for the ``/moto-api`` dashboard
(moto/moto_api/_internal/responses.py), and nothing removes them until a reset: the copy of each
message an SQS ReceiveMessage returns, each DynamoDB stream shard iterator. In a long-running server
memory grows without bound (~30 MB/s under the sandbox's load) and the garbage collector's passes over
it take ever more of the CPU.

AWS's behaviour: performance only: AWS's behaviour is unchanged. Every model is created and used as
before; only moto's own bookkeeping is skipped, so ``/moto-api/data.json`` lists no instances, and
moto's S3 reset closes the files of the keys its buckets still hold but not of keys no bucket holds
any more (those close when they are garbage-collected).

Upstream: yes. The registry serves a debugging dashboard, yet every moto server pays for it with memory
that only a reset gives back; an opt-out setting (or a bounded registry) is a small change.
``docs/upstream/untrack_models.md``.

Patches: moto 5.2.5, ``BaseModel.__new__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 1; returns a function that removes it."""
    from moto.core.common_models import BaseModel

    original = BaseModel.__dict__["__new__"]

    def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)

    BaseModel.__new__ = _untracked_new  # type: ignore[method-assign]

    def remove() -> None:
        BaseModel.__new__ = original  # type: ignore[method-assign]

    return remove
