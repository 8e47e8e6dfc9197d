"""The payments Lambda entry points (one module per function, each a ``handler``): thin -- the
Powertools set-up, the function's wiring, one call into the domain (``payments.intake``,
``payments.step_rules``, ``payments.payment_step``, ``payments.post_processing``, ``payments.invoice_step``).
"""
