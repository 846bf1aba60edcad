"""Three real nodes over the real PostgreSQL: games of every kind played through round-robin
clients while nodes are SIGKILLed and restarted; then a rolling restart (SIGTERM: hand-off).
Every table finishes with no error, and the journal holds every acknowledged action exactly
once, with no fork."""

from __future__ import annotations

import asyncio
import random

from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_engine.registry import GAMES
from tests.cluster.harness import Node, StartNodes, journals, round_robin
from tests.cluster.play import Stats, ledger_problems, new_table, play_to_the_end

KINDS = sorted(GAMES)
GAMES_PER_KIND = 2
PROGRESS_BETWEEN = 20
"""Acknowledged actions (all tables) between two disruptions."""


async def progress(stats: Stats, more: int, playing: asyncio.Future[object]) -> None:
    """Let the drivers make ``more`` further actions, and wait until they have."""
    stats.allow(more)
    while stats.acks < stats.allowed and not playing.done():
        await asyncio.sleep(0.02)  # polling the drivers' progress, bounded by the games
    stats.allow(more)  # keep calls in flight through the disruption that follows


async def run_under(disrupt: str, nodes: list[Node], cluster_url: str) -> None:
    stats = Stats(allowed=0)
    async with round_robin(nodes) as channel:
        stub = pb_grpc.GameServiceStub(channel)
        tables = [await new_table(stub, stats, kind, seed=100 * n + i)
                  for n, kind in enumerate(KINDS) for i in range(GAMES_PER_KIND)]
        playing = asyncio.ensure_future(asyncio.gather(*(
            play_to_the_end(stub, stats, table, random.Random(i))
            for i, table in enumerate(tables))))
        for round_ in range(3):
            await progress(stats, PROGRESS_BETWEEN, playing)
            if playing.done():
                playing.result()  # a driver's own error (one that gave up), raised as it is
                raise AssertionError("the games ended before the disruptions")
            node = nodes[round_ % len(nodes)]
            if disrupt == "sigkill":
                node.kill()
            else:
                assert node.terminate() == 0
            await progress(stats, PROGRESS_BETWEEN // 2, playing)
            await node.start()
        stats.allow(float("inf"))
        await asyncio.wait_for(playing, 150)
    assert stats.errors == []
    assert all(table.finished for table in tables)
    assert ledger_problems(tables, await journals(cluster_url)) == []
    taken = sum(len(node.events("table_taken_over")) for node in nodes)
    assert taken > 0, "no table changed node: the disruptions missed"
    if disrupt == "sigkill":  # a dead owner's tables answer UNAVAILABLE until its TTL is up
        assert stats.retries > 0
    else:  # a graceful stop: its tables move at once (a client may not even see an error)
        assert sum(len(node.events("cluster_left")) for node in nodes) == 3


async def test_selfplay_of_every_kind_survives_sigkills_and_restarts(
        start_nodes: StartNodes, cluster_url: str) -> None:
    await run_under("sigkill", await start_nodes(3), cluster_url)


async def test_a_rolling_restart_loses_nothing(start_nodes: StartNodes,
                                               cluster_url: str) -> None:
    await run_under("sigterm", await start_nodes(3), cluster_url)
