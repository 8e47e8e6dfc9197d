"""The payments service: the asynchronous operation pipeline (202 + operationId).

One module per Lambda entry point (``api``, ``outbox_publisher``, ``payment_worker``,
``post_processor``, ``invoice_worker``), each thin; the domain lives in ``intake`` (the HTTP side)
and ``steps`` (the consumers), the state machine in ``operations``, and ``store`` is the only module
that knows table attribute names.
"""
