"""Prometheus metrics of a cluster node (on ``--metrics-port`` with the server's own)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from tapis_service.door.rpcs import RPCS, Routing

TABLES_OWNED = Gauge("tapis_cluster_tables_owned",
                     "Tables this node holds in memory and serves (set at each heartbeat)")
TAKEOVERS = Counter("tapis_cluster_takeovers_total",
                    "Tables this node took over from a dead or departed owner",
                    ["trigger"])
FORWARDS = Counter("tapis_cluster_forwards_total",
                   "Calls relayed to the node that owns their table (through the tunnel)",
                   ["method"])
FORWARD_SECONDS = Histogram(
    "tapis_cluster_forward_seconds", "Unary calls relayed to another node: round trip",
    ["method"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0))
TABLES_LOST = Counter("tapis_cluster_tables_lost_total",
                      "Tables this node gave up because another node owns them now")
MEMBERS = Gauge("tapis_cluster_members",
                "Live members of the cluster this node sees, itself included: each one whose "
                "heartbeat it has read move on within a TTL (a member first read counts once "
                "it beats again; set at each heartbeat that reached the database: see "
                "tapis_cluster_lease_age_seconds)")
LEASE_AGE = Gauge("tapis_cluster_lease_age_seconds",
                  "Seconds since this node's membership was last renewed (a heartbeat a "
                  "second: beyond --node-ttl the others take its tables over)")

TRIGGERS = ("call", "sweep", "list")
"""What makes a node take a table over (``Locator.adopt``)."""
for _trigger in TRIGGERS:  # every counter at 0 from the start
    TAKEOVERS.labels(_trigger)
for _rpc in RPCS:  # the methods a node relays to a table's owner
    if _rpc.routing in (Routing.TABLE, Routing.EVERY_NODE):
        FORWARDS.labels(_rpc.name)
