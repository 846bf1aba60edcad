"""The War load over the player WebSocket: ``python -m tapis_bench.websocket`` (``make bench-ws``).

A ``tapis-server`` process with ``--ws-port`` (memory store, or SQLite with ``--store sqlite``);
``--tables`` War tables, each with two persons on sockets of their own, each socket following
its table's events; one action in flight per table: the seat the table awaits reveals (its seat
token on the frame, a request id), and the next action starts once the answer is back and the
events reached both sockets. Figures over the measured window: the server's CPU per action
(``/proc``), actions per second, SubmitAction p50/p99. Prints one JSON object.

``"threads"``: the server's busiest threads over the window (``/proc/PID/task/TID/stat`` and
``status``), each one's user and system CPU and its voluntary and involuntary context
switches per action; ``"main"`` marks the event loop's (on SQLite, which commits on the loop,
its voluntary switches include each commit's fsync).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_bench.procs import free_port, progress, wait_ready
from tapis_bench.stats import cpu_seconds, percentile, raise_fd_limit

TICKS = os.sysconf("SC_CLK_TCK")
"""``/proc``'s CPU times are in these per second."""
REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
NEXT_GAME = pb.Action(start_next_game=pb.StartNextGame())


class Socket(WSListener):
    """One client socket: requests answered by id, event frames handed to ``on_events``."""

    def __init__(self) -> None:
        self.transport: WSTransport | None = None
        self.waiting: dict[int, asyncio.Future[ws_pb.ServerFrame]] = {}
        self.next_id = 0
        self.on_events: dict[int, Any] = {}

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type is not WSMsgType.BINARY:
            return
        message = ws_pb.ServerFrame.FromString(frame.get_payload_as_bytes())
        waiter = self.waiting.pop(message.id, None)
        if waiter is not None:
            waiter.set_result(message)
        elif message.id in self.on_events:
            self.on_events[message.id](message)

    def send(self, frame: ws_pb.ClientFrame) -> int:
        self.next_id += 1
        frame.id = self.next_id
        assert self.transport is not None
        self.transport.send(WSMsgType.BINARY, frame.SerializeToString())
        return frame.id

    async def call(self, frame: ws_pb.ClientFrame) -> ws_pb.ServerFrame:
        answer: asyncio.Future[ws_pb.ServerFrame] = asyncio.get_running_loop().create_future()
        self.waiting[self.send(frame)] = answer
        message = await answer
        if message.WhichOneof("response") == "refusal":
            raise RuntimeError(f"refused: {message.refusal.message}")
        return message


@dataclass
class Recorder:
    measuring: bool = False
    actions: int = 0
    submit_ms: list[float] = field(default_factory=list)


@dataclass
class Table:
    game_id: str
    sockets: list[Socket]
    tokens: list[str]
    awaited: int = 0
    seen: list[int] = field(default_factory=lambda: [0, 0])
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    wanted: int = 0

    def events(self, seat: int, frame: ws_pb.ServerFrame) -> None:
        self.seen[seat] = max(self.seen[seat], frame.events.events[-1].sequence)
        if min(self.seen) >= self.wanted:
            self.arrived.set()


async def open_socket(url: str, wait_s: float = 30.0) -> Socket:
    """A socket to ``url``; refused connections are tried again for ``wait_s`` (the gRPC port
    the server's readiness is read on may take calls before the WebSocket port listens)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            _, listener = await ws_connect(Socket, url)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    assert isinstance(listener, Socket)
    return listener


async def open_table(url: str, index: int) -> Table:
    sockets = [await open_socket(url), await open_socket(url)]
    created = await sockets[0].call(ws_pb.ClientFrame(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, war=war_pb2.WarOptions(target_points=1000),
        request_id=f"bench-{index}")))
    game_id = created.create_game.game.game_id
    tokens = []
    for seat, socket in enumerate(sockets):
        joined = await socket.call(ws_pb.ClientFrame(join_game=pb.JoinGameRequest(
            game_id=game_id, seat=seat, display_name=f"p{seat}", request_id=uuid.uuid4().hex)))
        tokens.append(joined.join_game.seat_token)
    table = Table(game_id, sockets, tokens)
    view = await sockets[0].call(ws_pb.ClientFrame(seat_token=tokens[0],
                                                   get_game=pb.GetGameRequest(game_id=game_id)))
    table.awaited = view.get_game.game.awaiting_seats[0]
    table.seen = [view.get_game.game.last_sequence] * 2
    for seat, socket in enumerate(sockets):
        stream = socket.send(ws_pb.ClientFrame(seat_token=tokens[seat], stream_events=(
            pb.StreamEventsRequest(game_id=game_id,
                                   after_sequence=view.get_game.game.last_sequence))))
        socket.on_events[stream] = lambda frame, seat=seat: table.events(seat, frame)
    return table


async def play(table: Table, rec: Recorder, stop: asyncio.Event) -> None:
    while not stop.is_set():
        seat = table.awaited
        started = time.perf_counter()
        answer = await table.sockets[seat].call(ws_pb.ClientFrame(
            seat_token=table.tokens[seat], submit_action=pb.SubmitActionRequest(
                game_id=table.game_id, action=REVEAL, request_id=uuid.uuid4().hex)))
        answered = time.perf_counter()
        events = answer.submit_action.events
        table.wanted = events[-1].sequence
        table.arrived.clear()
        if min(table.seen) < table.wanted:
            await table.arrived.wait()
        if rec.measuring:
            rec.actions += 1
            rec.submit_ms.append((answered - started) * 1000)
        if events[-1].awaiting_seats:
            table.awaited = events[-1].awaiting_seats[0]
        else:  # the game ended: the next game of the series
            await table.sockets[0].call(ws_pb.ClientFrame(
                seat_token=table.tokens[0], submit_action=pb.SubmitActionRequest(
                    game_id=table.game_id, action=NEXT_GAME, request_id=uuid.uuid4().hex)))
            view = await table.sockets[0].call(ws_pb.ClientFrame(
                seat_token=table.tokens[0], get_game=pb.GetGameRequest(game_id=table.game_id)))
            table.awaited = view.get_game.game.awaiting_seats[0]


async def measure(url: str, pid: int, tables: int, warmup_s: float,
                  seconds: float) -> dict[str, Any]:
    opened = [await open_table(url, i) for i in range(tables)]
    rec, stop = Recorder(), asyncio.Event()
    players = [asyncio.ensure_future(play(t, rec, stop)) for t in opened]
    await asyncio.sleep(warmup_s)
    threads = thread_figures(pid)
    cpu, started = cpu_seconds(pid), time.perf_counter()
    rec.measuring = True
    await asyncio.sleep(seconds)
    rec.measuring = False
    cpu, elapsed = cpu_seconds(pid) - cpu, time.perf_counter() - started
    after = thread_figures(pid)
    stop.set()
    await asyncio.gather(*players)
    for table in opened:
        for socket in table.sockets:
            assert socket.transport is not None
            socket.transport.disconnect()
    return {
        "tables": tables, "actions": rec.actions,
        "actions_per_s": round(rec.actions / elapsed, 1),
        "server_cpu_us_per_action": round(cpu / rec.actions * 1e6, 1) if rec.actions else None,
        "submit_p50_ms": percentile(rec.submit_ms, 50),
        "submit_p99_ms": percentile(rec.submit_ms, 99),
        "threads": per_action(threads, after, pid, rec.actions),
    }


def thread_figures(pid: int) -> dict[int, tuple[float, float, int, int]]:
    """Each thread of ``pid``: user and system CPU seconds, voluntary and involuntary context
    switches so far."""
    figures = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = dict(line.split(":", 1) for line in
                          (task / "status").read_text().splitlines() if ":" in line)
        except OSError:  # the thread ended
            continue
        figures[int(task.name)] = (int(stat[11]) / TICKS, int(stat[12]) / TICKS,
                                   int(status["voluntary_ctxt_switches"]),
                                   int(status["nonvoluntary_ctxt_switches"]))
    return figures


def per_action(before: dict[int, tuple[float, float, int, int]],
               after: dict[int, tuple[float, float, int, int]], pid: int,
               actions: int) -> list[dict[str, Any]]:
    """The three busiest threads between two ``thread_figures``, per action."""
    rows = []
    for tid, (user, system, voluntary, involuntary) in after.items():
        if tid not in before or not actions:
            continue
        was = before[tid]
        rows.append({"main": tid == pid,
                     "user_us": round((user - was[0]) / actions * 1e6, 1),
                     "system_us": round((system - was[1]) / actions * 1e6, 1),
                     "voluntary_switches": round((voluntary - was[2]) / actions, 3),
                     "involuntary_switches": round((involuntary - was[3]) / actions, 3)})
    rows.sort(key=lambda row: -(row["user_us"] + row["system_us"]))
    return rows[:3]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", default="50,500", help="table counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    args = parser.parse_args(argv)
    raise_fd_limit()
    figures = []
    for tables in (int(n) for n in args.tables.split(",")):
        with tempfile.TemporaryDirectory(prefix="tapis-bench-ws-") as data_dir:
            port, ws_port = free_port(), free_port()
            command = [sys.executable, "-m", "tapis_service.process.main", "--port", str(port),
                       "--ws-port", str(ws_port), "--store", args.store,
                       "--log-level", "warning", "--max-games", str(tables * 2 + 100),
                       # one load generator creates every table, without a backend key
                       "--create-rate", "0", "--keyless-create-rate", "0",
                       "--keyless-max-tables", "0", "--keyless-address-share", "0"]
            if args.store == "sqlite":
                command += ["--data-dir", str(Path(data_dir))]
            server = subprocess.Popen(command)
            try:
                wait_ready(port, server)
                progress(f"websocket: {tables} tables on the {args.store} store")
                figures.append(asyncio.run(measure(f"ws://127.0.0.1:{ws_port}/ws", server.pid,
                                                   tables, args.warmup, args.seconds)))
            finally:
                server.terminate()
                server.wait(30)
    print(json.dumps({"websocket": {"store": args.store, "runs": figures}}))


if __name__ == "__main__":
    main()
