"""The orders Lambda entry points (one module per function, each a ``handler``): thin -- the
Powertools set-up, the function's wiring, one call into the domain (``orders.intake``,
``orders.fulfilment``, ``orders.notification``, ``orders.archive``).
"""
