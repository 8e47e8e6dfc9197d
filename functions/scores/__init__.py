"""The scores service: hourly agent score snapshots, timed and delivered by EventBridge.

Entry points (one module each, thin): ``authorizer`` (HTTP API Lambda authorizer: the API key from
Secrets Manager), ``api`` (``POST /score-snapshots`` -> 202 and a job on the snapshot queue;
``GET /agents/{agentId}/scores``) and ``snapshot_worker`` (ScoreSnapshotDue -> one snapshot per
agent for that hour). The formula is in ``scoring``, the job in ``snapshots``, hour parsing in
``hours``, the API contract in ``models``; ``store`` is the only module that knows attribute names.
"""
