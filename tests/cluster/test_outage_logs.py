"""A PostgreSQL outage as three cluster nodes live it (the database's postmaster stopped, then
started again): every node stays alive, its lease's age grows past the TTL for Prometheus to
see, and every line each node writes meanwhile (asyncpg's pool included) is a JSON object
carrying that node's id; all serve again once the database is back."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from tests.cluster.harness import TTL_S, Node
from tests.support.postgres import own_postgres, restart_postgres, stop_postgres  # noqa: F401
from tests.support.process import health_status

WAIT_S = 60.0


async def until(condition: Any, what: str) -> None:
    """Poll ``condition()`` until true (bounded: the test fails, never hangs)."""
    give_up = time.monotonic() + WAIT_S
    while not await condition():
        assert time.monotonic() < give_up, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.1)


async def test_through_a_database_outage_every_line_of_every_node_is_json_with_its_id(
        own_postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    url = str(own_postgres.get_uri())
    nodes = [Node(url, tmp_path) for _ in range(3)]
    try:
        for node in nodes:
            await node.start()

        async def everyone(service: str, wanted: str) -> bool:
            return all([await health_status(n.address, service) == wanted for n in nodes])

        await asyncio.to_thread(stop_postgres, own_postgres)
        await until(lambda: everyone("", "NOT_SERVING"), "every node NOT_SERVING")

        async def lapsed() -> bool:
            return all(n.metric("tapis_cluster_lease_age_seconds") > TTL_S for n in nodes)

        await until(lapsed, "every lease older than the TTL")
        assert await everyone("liveness", "SERVING")
        await asyncio.to_thread(restart_postgres, own_postgres)
        await until(lambda: everyone("", "SERVING"), "every node SERVING again")

        async def renewed() -> bool:
            return all(n.metric("tapis_cluster_lease_age_seconds") < TTL_S
                       and n.metric("tapis_cluster_members") == 3 for n in nodes)

        await until(renewed, "every lease renewed, three members seen")
    finally:
        for node in nodes:
            node.stop()
    for node in nodes:
        text = node.log.read_text()
        lines = [json.loads(line) for line in text.splitlines()]  # every line: JSON
        assert lines and all(isinstance(line, dict) for line in lines), node.log
        assert len({line.get("node") for line in lines}) == 1, node.log
        assert None not in {line.get("node") for line in lines}, node.log
