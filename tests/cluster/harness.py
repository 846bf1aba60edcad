"""Real cluster nodes (`tapis-server --database-url ... --advertise ...` processes) over the
test run's embedded PostgreSQL: start, SIGKILL, SIGTERM, SIGSTOP/SIGCONT, restart; a round-robin
channel over all of them; the journal as the database holds it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc
from google.rpc import error_details_pb2, status_pb2

from tests.support.process import free_port, wait_serving

RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                     ("grpc.min_reconnect_backoff_ms", 100),
                     ("grpc.max_reconnect_backoff_ms", 1000)]
"""Reconnect soon after a node restarts (gRPC's default backoff grows to 120 s)."""
TTL_S = 1.5
BOT_DELAY_MS = 5


@dataclass
class Node:
    """One node process; its port stays the same across restarts (its node id does not)."""

    database_url: str
    log_dir: Path
    extra: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.log_dir / f"node-{self.port}.log"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tapis_service.process.main", "--port", str(self.port),
                "--database-url", self.database_url, "--advertise", self.address,
                "--node-ttl", str(TTL_S), "--bot-delay-ms", str(BOT_DELAY_MS),
                "--metrics-port", str(self.metrics_port), "--log-level", "info",
                "--allow-stacked-decks", "--create-rate", "0", "--keyless-create-rate", "0",
                "--join-rate", "0", "--list-rate", "0", "--keyless-max-tables", "0", *self.extra]

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        await wait_serving(self.address, process=self.process)

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        self.signal(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(10)
        self.process = None

    def terminate(self) -> int:
        """SIGTERM: a graceful stop (hand-off); the exit code."""
        self.signal(signal.SIGTERM)
        assert self.process is not None
        code = self.process.wait(30)
        self.process = None
        return code

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.kill()

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the node's Prometheus metrics (0 when absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=5).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v
                                               for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON line of the node's log."""
        lines = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    continue
        return lines

    def events(self, name: str) -> list[dict[str, Any]]:
        """The node's log lines (JSON) whose event is ``name``."""
        found = []
        for line in self.log.read_text().splitlines():
            if f'"{name}"' in line:
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return [e for e in found if e.get("event") == name]


def round_robin(nodes: list[Node]) -> grpc.aio.Channel:
    """A client channel over every node, spreading calls with gRPC's round_robin policy."""
    target = "ipv4:" + ",".join(node.address for node in nodes)
    return grpc.aio.insecure_channel(
        target, options=[("grpc.lb_policy_name", "round_robin"), *RECONNECT_OPTIONS])


async def journals(database_url: str) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """game id -> [(index, entry)] in index order, as committed."""
    connection = await asyncpg.connect(database_url)
    try:
        rows = await connection.fetch("SELECT game_id, idx, entry FROM journal "
                                      "ORDER BY game_id, idx")
    finally:
        await connection.close()
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for row in rows:
        out.setdefault(row["game_id"], []).append((row["idx"], json.loads(row["entry"])))
    return out


async def fetch(database_url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(database_url)
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


StartNodes = Callable[[int], Awaitable[list[Node]]]
"""The ``start_nodes`` fixture: ``await start_nodes(n)`` gives n more running nodes."""


def resume_point(error: grpc.aio.AioRpcError) -> tuple[str, str]:
    """(reason, resume_after_sequence) of a stream's end."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason, info.metadata.get("resume_after_sequence", "")
    return "", ""
