"""The orders service: SNS fan-out of order events (the fan-out seed note's system).

Layers, each in its own place:

* entry points -- ``handlers/``: ``api`` (POST /orders, GET /orders/{id}, cancel), ``outbox_publisher``
  (orders-table stream -> SNS ``order-events``), and the consumers ``inventory``, ``notifier``,
  ``paid_orders``, ``failed_payments`` and ``shipping``: thin, one call into the domain each;
* domain -- ``intake`` (the HTTP side), ``fulfilment`` (what happens to a placed order: stock reserved
  or released, a payment applied), ``notification``, ``archive``; the state machine in ``orders``;
* data access -- ``store``, the only module that knows table attribute names;
* contract -- ``subscriptions`` (event types and filter policies; the CDK stack imports it too) and
  ``models`` (the API);
* wiring -- ``settings`` and ``wiring``.
"""
