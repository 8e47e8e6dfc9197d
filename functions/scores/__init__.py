"""The scores service: hourly agent score snapshots, timed and delivered by EventBridge.

Layers, each in its own place:

* entry points -- ``handlers/``: ``authorizer`` (HTTP API Lambda authorizer), ``api``
  (``POST /score-snapshots`` -> 202 and a job on the snapshot queue; ``GET /agents/{agentId}/scores``)
  and ``snapshot_worker`` (ScoreSnapshotDue -> one snapshot per agent for that hour);
* domain -- the formula in ``scoring``, the job in ``snapshots``, hour parsing in ``hours``, the API
  key in ``api_key``, the API contract in ``models``;
* data access -- ``store``, the only module that knows attribute names;
* wiring -- ``settings`` and ``wiring``.
"""
