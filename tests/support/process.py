"""A real `tapis-server` process on a free port and a data directory: start, kill, restart."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis_clients.connection import CHANNEL_OPTIONS as RECONNECT_OPTIONS

READY_WITHIN_S = 20.0


def _ephemeral_low() -> int:
    """The first port the kernel hands out for outgoing connections (and for ``bind(0)``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_LOW = 10_000
_HIGH = max(_LOW + 1_000, _ephemeral_low())
_picked = itertools.count(os.getpid() * 7_919)  # apart from other test processes' picks


def free_port() -> int:
    """A port free now and below the ephemeral range, so that no outgoing connection (a node's
    own, a client's) takes it before the server binds it, or while a killed server is down and
    about to start again on it; each test process walks the range from its own place."""
    span = _HIGH - _LOW
    for _ in range(span):
        port = _LOW + next(_picked) % span
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {_LOW}..{_HIGH}")


def channel(target: str, credentials: grpc.ChannelCredentials | None = None
            ) -> grpc.aio.Channel:
    """A channel that reconnects soon after a restart (the same options as the clients'),
    over TLS with ``credentials``."""
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials, options=RECONNECT_OPTIONS)
    return grpc.aio.insecure_channel(target, options=RECONNECT_OPTIONS)


async def wait_serving(target: str, within_s: float = READY_WITHIN_S,
                       process: subprocess.Popen[bytes] | None = None,
                       credentials: grpc.ChannelCredentials | None = None) -> None:
    """Poll grpc health until SERVING (bounded); fail early if the process died."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + within_s
    async with channel(target, credentials) as probe:
        health = health_pb2_grpc.HealthStub(probe)
        while True:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}")
            try:
                answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if loop.time() > give_up:
                raise TimeoutError(f"{target} not SERVING after {within_s} s")
            await asyncio.sleep(0.05)


PROBE_S = 5.0
"""The longest a health probe waits for its answer."""


async def health_status(target: str, service: str = "") -> str:
    """The health service's answer for ``service`` (``UNREACHABLE`` if none in ``PROBE_S``).

    A server that is up answers at once, and one that is down or speaks TLS fails at once; the
    timeout only bounds a live server's answer on a loaded host (a 1 s bound was missed there
    by a server's first probe after PostgreSQL's return, with the host's two cores busy).
    The deploy files' own probes allow 2 s and three misses."""
    async with channel(target) as probe:
        try:
            answer = await health_pb2_grpc.HealthStub(probe).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=PROBE_S)
        except grpc.aio.AioRpcError as error:
            return "UNREACHABLE" if error.code() != grpc.StatusCode.NOT_FOUND else "UNKNOWN"
        return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


class ServerProcess:
    """`python -m tapis_service.process.main` on ``data_dir``; the port stays the same across
    restarts."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "server.log"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tapis_service.process.main", "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--bot-delay-ms", "0",
                "--allow-stacked-decks",  # the drivers choose seeds, for reproducible play
                "--log-level", "warning", *self.extra]

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        await wait_serving(self.target, process=self.process)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.process = None

    def terminate(self) -> int:
        """SIGTERM: the graceful shutdown; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(30)
        self.process = None
        return code

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()
