"""Prometheus metrics of a cluster node (on ``--metrics-port`` with the server's own)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
