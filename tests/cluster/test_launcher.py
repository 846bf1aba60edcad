"""`tapis-cluster`: an embedded PostgreSQL and N nodes, one JSON line once every node answers
health SERVING, everything stopped on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

pytestmark = pytest.mark.slow  # an embedded PostgreSQL and node processes, killed

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
    metrics_port = consecutive_free_ports(2)
    while abs(metrics_port - port) < 2:  # two runs apart
        metrics_port = consecutive_free_ports(2)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tapis_service.cluster.launcher", "--nodes", "2", "--port",
         str(port), "--metrics-port", str(metrics_port), "--data-dir", str(data_dir), "--",
         "--node-ttl", "1.5"],
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
        # each node its own metrics port (make cluster: 9101-9103)
        assert [node["metrics_port"] for node in line["nodes"]] == [metrics_port,
                                                                    metrics_port + 1]
        for node in line["nodes"]:
            with urllib.request.urlopen(f"http://127.0.0.1:{node['metrics_port']}/metrics",
                                        timeout=5) as page:
                assert b"tapis_cluster_members" in page.read()
        # a burst, as a process group's SIGTERM, a Ctrl-C and a closed terminal can make: the
        # handler must take no lock (it did, and a signal landing inside it deadlocked it)
        for number in range(200):
            launcher.send_signal((signal.SIGTERM, signal.SIGINT, signal.SIGHUP)[number % 3])
        assert launcher.wait(60) == 0
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


def test_the_nodes_of_a_killed_launcher_stop_and_a_new_launcher_takes_over() -> None:
    """SIGKILL leaves the launcher no time to stop anything: its nodes get SIGTERM from the
    kernel (the parent-death signal) and stop; PostgreSQL stays up, and the next launcher on
    the same data directory serves with it."""
    data_dir = Path(tempfile.mkdtemp(prefix="tapis-cluster-test-"))
    port = consecutive_free_ports(1)
    command = [sys.executable, "-m", "tapis_service.cluster.launcher", "--nodes", "1", "--port",
               str(port), "--data-dir", str(data_dir), "--", "--node-ttl", "1.5"]
    launchers: list[subprocess.Popen[bytes]] = []
    nodes: list[int] = []
    try:
        for _ in range(2):
            launchers.append(subprocess.Popen(command, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL,
                                              env={**os.environ, "PYTHONUNBUFFERED": "1"}))
            stdout = launchers[-1].stdout
            assert stdout is not None
            ready, _, _ = select.select([stdout], [], [], READY_WITHIN_S)
            assert ready, f"no JSON line within {READY_WITHIN_S} s"
            (node,) = json.loads(stdout.readline())["nodes"]
            nodes.append(node["pid"])
            launchers[-1].kill()
            launchers[-1].wait()
            assert _gone_within(node["pid"], 30), "the node outlived its killed launcher"
    finally:
        for launcher in launchers:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
        for pid in nodes:  # a node that outlived its launcher (the test failed)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _stop_postgres(data_dir / "pgdata")
        shutil.rmtree(data_dir, ignore_errors=True)


def _stop_postgres(pgdata: Path) -> None:
    """Stop the PostgreSQL a killed launcher left on ``pgdata`` (fast shutdown: SIGINT to the
    postmaster, whose pid is the first line of postmaster.pid)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    if not _gone_within(pid, 30):
        os.kill(pid, signal.SIGKILL)


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has exited (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return True
        time.sleep(0.05)
    return False
