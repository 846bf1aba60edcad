"""Cluster fixtures: nodes over a fresh database in the run's embedded PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cluster.harness import Node, StartNodes


@pytest.fixture
def cluster_url(database_url: str) -> str:
    """The cluster's database: a fresh, empty one per test (``tests.support.postgres``)."""
    return database_url


@pytest.fixture
async def start_nodes(cluster_url: str, tmp_path: Path) -> AsyncIterator[StartNodes]:
    """``await start_nodes(n)``: n more running nodes; every one is killed at the end."""
    started: list[Node] = []

    async def start(count: int) -> list[Node]:
        nodes = [Node(cluster_url, tmp_path) for _ in range(count)]
        started.extend(nodes)  # before starting them: one that fails leaves none running
        for node in nodes:
            await node.start()
        return nodes

    yield start
    for node in started:
        node.stop()
