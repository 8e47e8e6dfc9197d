"""The orders service: SNS fan-out of order events (the fan-out seed note's system).

One module per Lambda entry point, each thin: ``api`` (POST /orders, GET /orders/{id}, cancel),
``outbox_publisher`` (orders-table stream -> SNS ``order-events``), and the consumers ``inventory``
(reserve / release stock once per order), ``notifier`` (customer webhook once per event),
``analytics`` (one S3 object per eventId) and ``paid_orders`` (PaymentCompleted from payments ->
order PAID). The domain lives in ``intake`` (the HTTP side), ``steps`` (inventory and paid orders),
``notification`` and ``archive``; the state machine in ``orders``; ``store`` is the only module that
knows table attribute names; ``subscriptions`` is the fan-out contract (event types and filter
policies) that the CDK stack imports too.
"""
