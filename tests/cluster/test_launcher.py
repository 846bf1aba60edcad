"""`tapis-cluster`: an embedded PostgreSQL and N nodes, one JSON line once every node answers
health SERVING, everything stopped on SIGTERM."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

READY_WITHIN_S = 60.0


def consecutive_free_ports(count: int) -> int:
    """A first port such that it and the ``count - 1`` after it are free now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first: int = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as taken:
                    taken.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError("no run of free ports")


def test_tapis_cluster_prints_its_nodes_serves_and_stops_on_sigterm() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="tapis-cluster-test-"))  # not pytest's 0700 root
    port = consecutive_free_ports(2)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tapis_service.cluster.launcher", "--nodes", "2", "--port",
         str(port), "--data-dir", str(data_dir), "--", "--node-ttl", "1.5"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert launcher.stdout is not None
        ready, _, _ = select.select([launcher.stdout], [], [], READY_WITHIN_S)
        assert ready, f"no JSON line within {READY_WITHIN_S} s"
        line = json.loads(launcher.stdout.readline())
        assert line["database_url"].startswith("postgresql://")
        assert [node["port"] for node in line["nodes"]] == [port, port + 1]
        assert line["target"] == f"ipv4:127.0.0.1:{port},127.0.0.1:{port + 1}"
        for node in line["nodes"]:
            with grpc.insecure_channel(f"127.0.0.1:{node['port']}") as channel:
                answer = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        for _ in range(200):  # a burst, as a process group's SIGTERM and a Ctrl-C can make:
            launcher.send_signal(signal.SIGTERM)  # its handler must take no lock (it did,
        assert launcher.wait(60) == 0  # and a signal landing inside it deadlocked the launcher)
        for node in line["nodes"]:
            assert not Path(f"/proc/{node['pid']}").exists() or _zombie(node["pid"])
        assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
