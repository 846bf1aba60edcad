"""Liveness apart from readiness, through a real PostgreSQL outage (its postmaster stopped):
liveness stays SERVING, readiness goes NOT_SERVING on an idle server (the store is probed, no
write has to fail first); a server started during the outage waits instead of exiting; both
are SERVING within 10 s of PostgreSQL's return. Throughout, every line either writes on stderr
is a JSON object carrying its node id (asyncpg's own lines included)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from typing import Any

from tests.support.postgres import own_postgres, restart_postgres, stop_postgres  # noqa: F401
from tests.support.process import free_port, health_status

BACK_WITHIN_S = 10.0


async def until(target: str, service: str, wanted: str, within_s: float,
                process: subprocess.Popen[bytes]) -> float:
    """Poll health until ``service`` reports ``wanted``; the seconds it took."""
    started = time.monotonic()
    while (status := await health_status(target, service)) != wanted:
        assert process.poll() is None, f"the server exited with {process.returncode}"
        assert time.monotonic() - started < within_s, f"{target} {service!r}: {status}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def start(url: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tapis_service.process.main",
                                "--port", str(port), "--database-url", url,
                                "--log-level", "warning"],
                               stderr=subprocess.PIPE)
    return f"127.0.0.1:{port}", process


async def test_a_postgres_outage_leaves_liveness_alone(own_postgres: Any) -> None:  # noqa: F811
    url = str(own_postgres.get_uri())
    first, first_process = start(url)
    processes = [first_process]
    try:
        await until(first, "", "SERVING", 30, first_process)
        await asyncio.to_thread(stop_postgres, own_postgres)
        await until(first, "", "NOT_SERVING", 15, first_process)
        assert await health_status(first, "tapis.v1.GameService") == "NOT_SERVING"
        assert await health_status(first, "liveness") == "SERVING"

        second, second_process = start(url)  # started during the outage: it waits
        processes.append(second_process)
        await until(second, "liveness", "SERVING", 30, second_process)
        assert await health_status(second, "") == "NOT_SERVING"
        await asyncio.sleep(1.5)  # a few of its attempts fail meanwhile; it stays up
        assert second_process.poll() is None

        await asyncio.to_thread(restart_postgres, own_postgres)
        for target, process in ((first, first_process), (second, second_process)):
            await until(target, "", "SERVING", BACK_WITHIN_S, process)
        assert await health_status(first, "liveness") == "SERVING"
        for process in processes:
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
        stderr = second_process.stderr.read().decode() if second_process.stderr else ""
        assert stderr.count("waiting_for_database") <= 2  # one line per 10 s at most
        for process in processes:
            assert process.stderr is not None
            text = stderr if process is second_process else process.stderr.read().decode()
            lines = [json.loads(line) for line in text.splitlines()]
            assert lines and all(isinstance(line, dict) and line.get("node")
                                 for line in lines), text
            assert len({line["node"] for line in lines}) == 1
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
