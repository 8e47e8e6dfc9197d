"""An app-agnostic AWS emulator: any CDK app's synthesized templates, run on one machine as AWS would.

- ``emulator.stage``: ``Stage(StageConfig(app_root=...))`` brings a CDK app up from ``cdk.out``; an app
  subclasses it to add its fakes (``start_services``, ``function_environment``).
- ``emulator.server``: the moto server in its own process, with ``emulator.moto_patches`` applied; the
  clients (``client``) and the environment (``aws_env``) that point at it.
- ``emulator.provision``, ``emulator.templates``, ``emulator.cloudformation``: the templates read,
  intrinsics resolved, every resource created, DescribeStacks answered.
- ``emulator.runtime``, ``emulator.worker``, ``emulator.zygote``: Lambda execution environments.
- ``emulator.mappings``: event source mappings (SQS, DynamoDB streams) with Lambda's batching,
  partial batch responses and failure destinations.
- ``emulator.eventbridge``, ``emulator.bus_delivery``, ``emulator.event_patterns``, ``emulator.control``:
  buses, rules, Scheduler schedules, API destinations.
- ``emulator.http_api``, ``emulator.callers``, ``emulator.sigv4_verify``: API Gateway HTTP APIs, with
  SigV4 and ``execute-api:Invoke`` checked for two caller identities.
- ``emulator.iam``, ``emulator.iam_enforcer``, ``emulator.iam_requests``, ``emulator.iam_report``: IAM
  enforced on every call a function (or its mapping) makes, and the grants no call used.
- ``emulator.request_meter``, ``emulator.aws_faults``, ``emulator.cpu``, ``emulator.sqs_admin``: every
  request counted and priced, faults injected, CPU by part, SQS message move tasks.

It imports nothing from the app that uses it (``tests/sandbox/test_emulator_package.py``).
"""
