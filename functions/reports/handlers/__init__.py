"""The reports Lambda entry points (one module per function, each a ``handler``): thin -- the
Powertools set-up, the function's wiring, one call into the domain (``reports.verification``,
``reports.notification``).
"""
