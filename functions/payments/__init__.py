"""The payments service: the asynchronous operation pipeline (202 + operationId).

Layers, each in its own place:

* entry points -- ``handlers/`` (``api``, ``outbox_publisher``, ``payment_worker``, ``post_processor``,
  ``invoice_worker``): thin, one call into the domain each;
* domain -- ``intake`` (the HTTP side), ``steps`` (the payment, post-processing and invoice steps of an
  operation), the state machine in ``operations``, the API contract in ``models``;
* data access and partners -- ``store`` (the only module that knows table attribute names),
  ``legacy`` and ``invoices`` (the external HTTP systems);
* contract -- ``subscriptions`` (event types and filter policies; the CDK stack imports it too);
* wiring -- ``settings`` (what each function's environment holds) and ``wiring`` (clients, stores).
"""
