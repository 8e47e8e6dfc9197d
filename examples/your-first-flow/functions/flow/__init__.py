"""Your first flow: a task accepted over HTTP, done once by a queue consumer, and an hourly tick.

Layers, each in its own place (as in Relay's services):

* entry points -- ``handlers/``: ``api`` (``POST /tasks`` -> 202, the task queued) and ``worker`` (the
  tasks queue -> one conditional write per message);
* domain -- ``intake`` (the API's side: the event that asks for the task) and ``worker_steps`` (the worker's
  side: what each event does);
* data access -- ``store`` (the only module that knows the tasks table's attribute names);
* contract -- ``events`` (the event types; the CDK stack imports it for the schedule's message);
* wiring -- ``settings`` and ``wiring``.
"""
