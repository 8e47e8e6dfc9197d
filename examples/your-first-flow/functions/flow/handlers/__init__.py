"""The flow's Lambda entry points (one module per function, each a ``handler``): thin -- the
function's wiring and one call into the domain (``flow.intake``, ``flow.worker_steps``)."""
