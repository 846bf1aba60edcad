"""Tapis as a cluster on PostgreSQL (``tapis-server --database-url ... --advertise ...``):
any node answers any call, a dead node's tables go on elsewhere. See docs/cluster.md.

Only a server started with ``--advertise`` imports this package."""
