"""What a cluster node tells Prometheus of its membership: the live members it sees
(``tapis_cluster_members``) and its lease's age (``tapis_cluster_lease_age_seconds``) on every
node; counters that can be 0 are exported at 0 from the start (an alert on ``increase``
sees the first failure)."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.harness import TTL_S, Node, StartNodes

WAIT_S = 30.0


def samples(node: Node) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample the node exports: (name, labels) -> value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                  timeout=5).read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


async def until_every(nodes: list[Node], members: int) -> None:
    """Poll until every node sees ``members`` live members (bounded: fails, never hangs)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WAIT_S
    while any(node.metric("tapis_cluster_members") != members for node in nodes):
        assert loop.time() < give_up, [node.metric("tapis_cluster_members") for node in nodes]
        await asyncio.sleep(0.05)


async def test_every_node_exports_its_members_its_lease_age_and_its_failures_at_0(
        start_nodes: StartNodes) -> None:
    nodes = await start_nodes(3)
    for node in nodes:
        found = samples(node)
        assert found[("tapis_store_write_failures_total",
                      frozenset({("store", "postgres")}))] == 0
        for trigger in ("call", "sweep", "list"):
            assert found[("tapis_cluster_takeovers_total",
                          frozenset({("trigger", trigger)}))] == 0
        assert found[("tapis_cluster_forwards_total",
                      frozenset({("method", "SubmitAction")}))] == 0
        assert found[("tapis_cluster_tables_lost_total", frozenset())] == 0
        assert 0 <= found[("tapis_cluster_lease_age_seconds", frozenset())] < TTL_S
    await until_every(nodes, 3)
    nodes[0].kill()  # its membership expires after the TTL: the others see two
    await until_every(nodes[1:], 2)
    for node in nodes[1:]:
        assert 0 <= node.metric("tapis_cluster_lease_age_seconds") < TTL_S
