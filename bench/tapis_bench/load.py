"""The load generator, run in its own process: ``python -m tapis_bench.load CONFIG_JSON``.

Modes:

* ``actions``: ``games`` concurrent games (one action in flight each), every seat with its own
  stream open; each game submits its next action as soon as the previous one's answer is back
  and its events reached every seat's stream. Against ``bare`` the same loop calls the bare
  server's Submit, which pushes one message to each of the game's streams.
* ``interleaved``: the ``actions`` load against several servers at once, taking turns of a
  few seconds (``run_interleaved``): the side-by-side figures of ``make bench``. A side whose
  ``server`` is ``websocket`` plays over the player WebSocket (``target`` its ``ws://`` URL),
  each seat on a socket of its own.
* ``scale``: create ``games`` two-seat games, open both streams of each, then submit a light
  open-loop action load and measure SubmitAction latency at that size.

Prints one JSON object (the figures) on stdout.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import random
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import grpc
from google.protobuf.message import Message

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_bench.bare import STREAM, SUBMIT
from tapis_bench.stats import cpu_seconds, cpu_split, percentile, raise_fd_limit, rss_kib
from tapis_bench.websocket import Socket, open_socket
from tapis_engine.registry import DESCRIPTORS
from tapis_service.codec.adapters import REGISTERED

KINDS = {adapter.kind: cast("pb.GameKind.ValueType", adapter.proto_kind)
         for adapter in REGISTERED}
"""Every game's engine kind and its ``GameKind``."""
WAR_REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
NEXT_GAME = pb.Action(start_next_game=pb.StartNextGame())


def _action(field: str, message: Message) -> pb.Action:
    action = pb.Action()
    getattr(action, field).CopyFrom(message)
    return action


FIXED_ACTION = {
    game.kind: _action(adapter.field, adapter.action_to_proto(game.routine_action))
    for game, adapter in zip(DESCRIPTORS, REGISTERED, strict=True)
    if game.routine_action is not None}
"""Kinds whose awaited seat always has its routine move (the game's descriptor names it): no
GetGame needed to pick it."""


def _channels(target: str, count: int) -> list[grpc.aio.Channel]:
    """Distinct HTTP/2 connections (a local subchannel pool each)."""
    return [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(count)]


@dataclass
class Recorder:
    """Latencies (ms) of the measured window, and the action count."""

    measuring: bool = False
    actions: int = 0
    messages: int = 0
    """Stream messages received while measuring (every seat's stream)."""
    refused: int = 0
    client_cpu_s: float = 0.0
    """The load generator's own CPU (every thread) over the measured window."""
    submit_ms: list[float] = field(default_factory=list)
    event_ms: list[float] = field(default_factory=list)
    slowest: list[tuple[float, float]] = field(default_factory=list)

    def record(self, started: float, answered: float, latencies: list[float]) -> None:
        """One action done (its answer at ``answered``, its events' ``latencies``), counted
        when measuring."""
        if self.measuring:
            self.actions += 1
            self.submit_ms.append((answered - started) * 1000)
            self.event_ms.extend(latencies)


class Arrivals:
    """Waits until an action's version reached every stream of a game."""

    def __init__(self, streams: int) -> None:
        self.seen = [0] * streams
        self.version = 0
        self.started = 0.0
        self.missing: set[int] = set()
        self.latencies: list[float] = []
        self.done: asyncio.Future[None] | None = None
        self.recorder: Recorder | None = None

    def expect(self, version: int, started: float) -> asyncio.Future[None]:
        self.version, self.started = version, started
        self.missing = {i for i, v in enumerate(self.seen) if v < version}
        self.latencies = []
        self.done = asyncio.get_running_loop().create_future()
        if not self.missing:
            self.done.set_result(None)
        return self.done

    def arrived(self, stream: int, version: int) -> None:
        if self.recorder is not None and self.recorder.measuring:
            self.recorder.messages += 1
        if version > self.seen[stream]:
            self.seen[stream] = version
        if stream in self.missing and version >= self.version:
            self.missing.discard(stream)
            self.latencies.append((time.perf_counter() - self.started) * 1000)
            if not self.missing and self.done is not None and not self.done.done():
                self.done.set_result(None)


class Gate:
    """Lets a side's games act only while it is open (``interleaved`` mode): ``async with
    gate`` around each action; ``close`` returns once the actions in flight are done."""

    def __init__(self, is_open: bool = True) -> None:
        self._open = asyncio.Event()
        if is_open:
            self._open.set()
        self.in_flight = 0
        self._drained: asyncio.Future[None] | None = None

    async def __aenter__(self) -> None:
        while not self._open.is_set():  # closed again before this waiter ran: wait on
            await self._open.wait()
        self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        self.in_flight -= 1
        drained = self._drained
        if not self.in_flight and drained is not None and not drained.done():
            drained.set_result(None)

    def open(self) -> None:
        self._open.set()

    async def close(self) -> None:
        self._open.clear()
        if self.in_flight:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
            self._drained = None


OPEN = Gate()
"""The gate of every mode but ``interleaved``: always open."""


async def _consume(stream: AsyncIterator[Any], on_message: Callable[[Any], None]) -> None:
    try:
        async for message in stream:
            on_message(message)
    except (grpc.aio.AioRpcError, asyncio.CancelledError):
        return


def _bare_arrival(arrivals: Arrivals, seat: int) -> Callable[[bytes], None]:
    def on_message(message: bytes) -> None:
        arrivals.arrived(seat, struct.unpack(">Q", message)[0])

    return on_message


# --- the bare baseline ----------------------------------------------------------------------


async def bare_game(channel: grpc.aio.Channel, index: int, seats: int, rec: Recorder,
                    stop: asyncio.Event, tasks: list[asyncio.Task[None]],
                    gate: Gate = OPEN) -> None:
    game_id = index.to_bytes(16, "big")
    submit = channel.unary_unary(SUBMIT)
    arrivals = Arrivals(seats)
    arrivals.recorder = rec
    for seat in range(seats):
        call = channel.unary_stream(STREAM)(game_id)
        tasks.append(asyncio.create_task(_consume(call, _bare_arrival(arrivals, seat))))
    await asyncio.sleep(0.2)  # the streams are registered before the first push
    version = 0
    while not stop.is_set():
        async with gate:
            version += 1
            started = time.perf_counter()
            waiting = arrivals.expect(version, started)
            await submit(game_id + struct.pack(">Q", version))
            answered = time.perf_counter()
            await asyncio.wait_for(waiting, 30)
            rec.record(started, answered, arrivals.latencies)


# --- the service ---------------------------------------------------------------------------


def _auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Game:
    """One game driven by the load generator."""

    game_id: str
    stub: pb_grpc.GameServiceStub
    tokens: list[str]
    awaiting: tuple[int, ...]
    version: int
    arrivals: Arrivals
    over: bool = False
    busy: bool = False
    sent: int = 0


async def open_game(stub: pb_grpc.GameServiceStub, kind: str, seats: int, seed: int) -> Game:
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=KINDS[kind], seats=seats, seed=seed,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * seats))
    game_id = created.game.game_id
    tokens: list[str] = []
    view = created.game
    for seat in range(seats):
        joined = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat,
                                                        display_name=f"bench{seat}"))
        tokens.append(joined.seat_token)
        view = joined.game
    return Game(game_id, stub, tokens, tuple(view.awaiting_seats), view.version,
                Arrivals(seats))


STREAM_RETRIES = [0]
"""Streams re-opened (resumed by sequence) after the server refused or cut them."""


async def follow(game: Game, seat: int, stub: pb_grpc.GameServiceStub,
                 opening: asyncio.Semaphore | None = None) -> None:
    """Follow one seat's stream, resuming after the last sequence seen if it is cut (a burst
    of thousands of new streams can have some cancelled by the server, as a real client
    would meet them). ``opening`` bounds the streams being opened at once."""
    last = 0
    while True:
        if opening is not None:
            await opening.acquire()
        held = opening is not None
        call = stub.StreamEvents(pb.StreamEventsRequest(game_id=game.game_id,
                                                        after_sequence=last),
                                 metadata=_auth(game.tokens[seat]))
        try:
            async for message in call:
                last = message.events[-1].sequence
                game.arrivals.arrived(seat, message.events[-1].version)
                if held and last >= game.arrivals.seen[seat] and opening is not None:
                    opening.release()
                    held = False
            return
        except grpc.aio.AioRpcError as error:
            if error.code() not in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.RESOURCE_EXHAUSTED):
                return
        finally:
            if held and opening is not None:
                opening.release()
        STREAM_RETRIES[0] += 1
        await asyncio.sleep(0.05 + random.random() * 0.2)


def open_streams(game: Game, tasks: list[asyncio.Task[None]],
                 stubs: list[pb_grpc.GameServiceStub] | None = None,
                 opening: asyncio.Semaphore | None = None) -> None:
    for seat in range(len(game.tokens)):
        stub = stubs[seat % len(stubs)] if stubs else game.stub
        tasks.append(asyncio.create_task(follow(game, seat, stub, opening)))


async def next_action(game: Game, kind: str,
                      rng: random.Random) -> tuple[int, pb.Action] | None:
    """The seat to act and its action (GetGame for kinds with a real choice)."""
    if game.over:
        return 0, NEXT_GAME
    if not game.awaiting:
        return None
    seat = game.awaiting[0]
    fixed = FIXED_ACTION.get(kind)
    if fixed is not None:
        return seat, fixed
    view = (await game.stub.GetGame(pb.GetGameRequest(game_id=game.game_id),
                                    metadata=_auth(game.tokens[seat]))).game
    game.version = view.version
    game.over = view.status == pb.GAME_STATUS_GAME_OVER
    legal = [a for a in view.legal_actions if a.WhichOneof("action") != "start_next_game"]
    if game.over:
        return 0, NEXT_GAME
    if not legal:
        return None
    return seat, rng.choice(legal)


async def submit(game: Game, seat: int, action: pb.Action) -> pb.SubmitActionResponse:
    game.sent += 1
    response: pb.SubmitActionResponse = await game.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game.game_id, action=action,
                               request_id=f"r{game.sent}", expected_version=game.version),
        metadata=_auth(game.tokens[seat]))
    game.version = response.version
    if response.events:
        game.awaiting = tuple(response.events[-1].awaiting_seats)
        game.over = any(e.WhichOneof("body") == "game_ended" for e in response.events)
    return response


async def tapis_game(game: Game, kind: str, rec: Recorder, stop: asyncio.Event,
                     rng: random.Random, gate: Gate = OPEN) -> None:
    while not stop.is_set():
        async with gate:
            await _tapis_action(game, kind, rec, rng)


async def _tapis_action(game: Game, kind: str, rec: Recorder, rng: random.Random) -> None:
    """One action of a game, recorded when measuring."""
    picked = await next_action(game, kind, rng)
    if picked is None:  # nobody to move (real-time kinds): look again shortly
        await asyncio.sleep(0.001)
        game.awaiting = tuple(range(len(game.tokens)))
        return
    seat, action = picked
    started = time.perf_counter()
    # an accepted action gives version + 1 (the request carries expected_version)
    waiting = game.arrivals.expect(game.version + 1, started)
    try:
        await submit(game, seat, action)
    except grpc.aio.AioRpcError as error:
        if error.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION,
                            grpc.StatusCode.RESOURCE_EXHAUSTED):
            rec.refused += 1
            return
        raise
    answered = time.perf_counter()
    await asyncio.wait_for(waiting, 30)
    rec.record(started, answered, game.arrivals.latencies)


# --- the service over its player WebSocket ---------------------------------------------------


@dataclass
class WsGame:
    """One game driven over the player WebSocket: a socket per seat, each following the
    table's events (as a browser's player would)."""

    game_id: str
    sockets: list[Socket]
    tokens: list[str]
    awaiting: tuple[int, ...]
    version: int
    arrivals: Arrivals
    over: bool = False
    sent: int = 0


async def open_ws_game(url: str, kind: str, seats: int, seed: int) -> WsGame:
    sockets = [await open_socket(url) for _ in range(seats)]
    created = await sockets[0].call(ws_pb.ClientFrame(create_game=pb.CreateGameRequest(
        kind=KINDS[kind], seats=seats, seed=seed,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * seats)))
    game_id = created.create_game.game.game_id
    tokens: list[str] = []
    view = created.create_game.game
    for seat, socket in enumerate(sockets):
        joined = await socket.call(ws_pb.ClientFrame(join_game=pb.JoinGameRequest(
            game_id=game_id, seat=seat, display_name=f"bench{seat}")))
        tokens.append(joined.join_game.seat_token)
        view = joined.join_game.game
    game = WsGame(game_id, sockets, tokens, tuple(view.awaiting_seats), view.version,
                  Arrivals(seats))
    for seat, socket in enumerate(sockets):
        stream = socket.send(ws_pb.ClientFrame(
            seat_token=tokens[seat], stream_events=pb.StreamEventsRequest(
                game_id=game_id, after_sequence=view.last_sequence)))
        socket.on_events[stream] = functools.partial(_ws_arrival, game.arrivals, seat)
    return game


def _ws_arrival(arrivals: Arrivals, seat: int, frame: ws_pb.ServerFrame) -> None:
    if frame.WhichOneof("response") == "events":
        arrivals.arrived(seat, frame.events.events[-1].version)


async def ws_game(game: WsGame, kind: str, rec: Recorder, stop: asyncio.Event,
                  gate: Gate = OPEN) -> None:
    """The ``actions`` loop of ``tapis_game`` over the WebSocket (kinds with a routine
    action: War, Bataille Corse)."""
    fixed = FIXED_ACTION[kind]
    while not stop.is_set():
        async with gate:
            seat, action = (0, NEXT_GAME) if game.over else (game.awaiting[0], fixed)
            started = time.perf_counter()
            waiting = game.arrivals.expect(game.version + 1, started)
            game.sent += 1
            answer = await game.sockets[seat].call(ws_pb.ClientFrame(
                seat_token=game.tokens[seat], submit_action=pb.SubmitActionRequest(
                    game_id=game.game_id, action=action, request_id=f"r{game.sent}",
                    expected_version=game.version)))
            answered = time.perf_counter()
            response = answer.submit_action
            game.version = response.version
            if response.events:
                game.awaiting = tuple(response.events[-1].awaiting_seats)
                game.over = any(e.WhichOneof("body") == "game_ended" for e in response.events)
            await asyncio.wait_for(waiting, 30)
            rec.record(started, answered, game.arrivals.latencies)


async def start_ws_games(config: dict[str, Any], url: str, rec: Recorder, stop: asyncio.Event,
                         tasks: list[asyncio.Task[None]], gate: Gate = OPEN
                         ) -> list[asyncio.Task[None]]:
    """``games`` games over the player WebSocket at ``url``, their sockets following their
    events and their drivers acting whenever ``gate`` is open: the drivers (``tasks`` gains
    a closer of every socket)."""
    opened = await asyncio.gather(*(open_ws_game(url, config["kind"], config["seats"], 1000 + i)
                                    for i in range(config["games"])))
    for game in opened:
        game.arrivals.recorder = rec
    tasks.append(asyncio.create_task(_close_on_stop(opened, stop)))
    await asyncio.sleep(0.2)
    return [asyncio.create_task(ws_game(game, config["kind"], rec, stop, gate))
            for game in opened]


async def _close_on_stop(games: list[WsGame], stop: asyncio.Event) -> None:
    try:
        await stop.wait()
    finally:
        for game in games:
            for socket in game.sockets:
                if socket.transport is not None:
                    socket.transport.disconnect()


# --- modes ------------------------------------------------------------------------------------


def _summary(rec: Recorder, seconds: float) -> dict[str, Any]:
    def ms(values: list[float], q: float) -> float | None:
        value = percentile(values, q)
        return None if value is None else round(value, 3)

    return {"actions": rec.actions, "refused": rec.refused, "seconds": round(seconds, 3),
            "stream_messages_per_action": round(rec.messages / rec.actions, 2)
            if rec.actions else None,
            "actions_per_s": round(rec.actions / seconds, 1),
            "submit_p50_ms": ms(rec.submit_ms, 50), "submit_p99_ms": ms(rec.submit_ms, 99),
            "event_p50_ms": ms(rec.event_ms, 50), "event_p99_ms": ms(rec.event_ms, 99)}


async def measured(config: dict[str, Any], rec: Recorder, stop: asyncio.Event,
                   drivers: list[asyncio.Task[None]], tasks: list[asyncio.Task[None]],
                   channels: list[grpc.aio.Channel]) -> tuple[float, float | None]:
    """Warm up, record for ``duration_s``, then stop the drivers, their streams and channels;
    (the seconds recorded, the server's CPU seconds over them when ``server_pid`` is given)."""
    await asyncio.sleep(config["warmup_s"])
    pid = config.get("server_pid")
    cpu_before = cpu_seconds(pid) if pid else 0.0
    client_before = time.process_time()
    rec.measuring = True
    started = time.perf_counter()
    await asyncio.sleep(config["duration_s"])
    rec.measuring = False
    seconds = time.perf_counter() - started
    server_cpu_s = cpu_seconds(pid) - cpu_before if pid else None
    rec.client_cpu_s = time.process_time() - client_before
    await shut_down(stop, drivers, tasks, channels, wait_s=5)
    return seconds, server_cpu_s


async def shut_down(stop: asyncio.Event, drivers: list[asyncio.Task[None]],
                    tasks: list[asyncio.Task[None]], channels: list[grpc.aio.Channel],
                    wait_s: float = 0) -> None:
    """Stop the drivers (raising the first one's failure), their streams and channels; give
    the drivers up to ``wait_s`` to end their action in flight first."""
    stop.set()
    for driver in drivers:
        if driver.done() and driver.exception() is not None:
            raise driver.exception()  # type: ignore[misc]
    if wait_s:
        await asyncio.wait(drivers, timeout=wait_s)
    for task in tasks + drivers:
        task.cancel()
    for channel in channels:
        await channel.close()


def per_action_us(seconds: float | None, actions: int) -> float | None:
    """``seconds`` spread over ``actions``, in µs (None without either)."""
    return round(seconds / actions * 1e6, 1) if seconds is not None and actions else None


def figures_of(config: dict[str, Any], rec: Recorder, seconds: float,
               server_cpu_s: float | None) -> dict[str, Any]:
    """A measured load's figures: latencies and rate, the server's CPU per action (every
    thread, the steadier figure on a shared machine: time it spends preempted is not counted)
    and the generator's own (on 2 cores a costlier client slows the server's core too)."""
    games, seats = config["games"], config["seats"]
    result = _summary(rec, seconds)
    result.update(games=games, seats=seats, streams=games * seats,
                  stream_retries=STREAM_RETRIES[0],
                  server_cpu_s=None if server_cpu_s is None else round(server_cpu_s, 3),
                  server_cpu_us_per_action=per_action_us(server_cpu_s, rec.actions),
                  client_cpu_us_per_action=per_action_us(rec.client_cpu_s, rec.actions))
    return result


async def start_games(config: dict[str, Any], target: str, server: str, rec: Recorder,
                      stop: asyncio.Event, tasks: list[asyncio.Task[None]],
                      gate: Gate = OPEN) -> tuple[list[grpc.aio.Channel], list[asyncio.Task[None]]]:
    """``games`` games against ``server`` (``bare`` or ``tapis``) at ``target``, their streams
    open and their drivers acting whenever ``gate`` is open: (the channels, the drivers)."""
    channels = _channels(target, config["channels"])
    drivers: list[asyncio.Task[None]] = []
    games, seats = config["games"], config["seats"]
    if server == "bare":
        for i in range(games):
            drivers.append(asyncio.create_task(
                bare_game(channels[i % len(channels)], i, seats, rec, stop, tasks, gate)))
    else:
        stubs = [pb_grpc.GameServiceStub(c) for c in channels]
        opened = await asyncio.gather(*(
            open_game(stubs[i % len(stubs)], config["kind"], seats, 1000 + i)
            for i in range(games)))
        for game in opened:
            game.arrivals.recorder = rec
            open_streams(game, tasks)
        await asyncio.sleep(0.2)
        for i, game in enumerate(opened):
            drivers.append(asyncio.create_task(
                tapis_game(game, config["kind"], rec, stop, random.Random(i), gate)))
    return channels, drivers


async def run_actions(config: dict[str, Any]) -> dict[str, Any]:
    rec = Recorder()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    channels, drivers = await start_games(config, config["target"], config["server"], rec,
                                          stop, tasks)
    seconds, server_cpu_s = await measured(config, rec, stop, drivers, tasks, channels)
    return figures_of(config, rec, seconds, server_cpu_s)


@dataclass
class Side:
    """One server of an ``interleaved`` run, with its games and what its turns measured."""

    name: str
    pid: int
    rec: Recorder
    gate: Gate
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    server_system_s: float = 0.0
    turns: list[dict[str, Any]] = field(default_factory=list)


async def run_interleaved(config: dict[str, Any]) -> dict[str, Any]:
    """The same action load against several servers (``sides``: name, server, target,
    server_pid) taking turns of ``turn_s`` seconds, ``turns`` turns each, in a rotating order.

    Only one side acts at a time (the others' games wait, streams open), and a turn ends once
    its actions in flight are answered and their events delivered, so each turn's server CPU
    (from /proc) and actions are that server's alone. Turns of a few seconds put every server
    under the same drift of a shared machine: its figures over all turns are set side by side.
    """
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    sides: list[Side] = []
    channels: list[grpc.aio.Channel] = []
    drivers: list[asyncio.Task[None]] = []
    for spec in config["sides"]:
        side = Side(spec["name"], spec["server_pid"], Recorder(), Gate(is_open=False))
        if spec["server"] == "websocket":
            driving = await start_ws_games(config, spec["target"], side.rec, stop, tasks,
                                           side.gate)
        else:
            opened, driving = await start_games(config, spec["target"], spec["server"],
                                                side.rec, stop, tasks, side.gate)
            channels += opened
        drivers += driving
        sides.append(side)
    for side in sides:  # warm-up, not measured
        side.gate.open()
        await asyncio.sleep(config["warmup_s"])
        await side.gate.close()
    for turn in range(config["turns"]):
        shift = turn % len(sides)
        for side in sides[shift:] + sides[:shift]:
            actions = side.rec.actions
            (user, system), client = cpu_split(side.pid), time.process_time()
            began = time.perf_counter()
            side.rec.measuring = True
            side.gate.open()
            await asyncio.sleep(config["turn_s"])
            await side.gate.close()  # its actions in flight answered, their events delivered
            side.rec.measuring = False
            seconds = time.perf_counter() - began
            user_after, system_after = cpu_split(side.pid)
            server_cpu_s = user_after + system_after - user - system
            side.seconds += seconds
            side.server_cpu_s += server_cpu_s
            side.server_system_s += system_after - system
            side.rec.client_cpu_s += time.process_time() - client
            done = side.rec.actions - actions
            side.turns.append({
                "actions": done, "seconds": round(seconds, 3),
                "actions_per_s": round(done / seconds, 1),
                "server_cpu_us_per_action": per_action_us(server_cpu_s, done)})
    await shut_down(stop, drivers, tasks, channels)  # the drivers wait at closed gates
    return {side.name: {**figures_of(config, side.rec, side.seconds, side.server_cpu_s),
                        "server_system_us_per_action": per_action_us(side.server_system_s,
                                                                     side.rec.actions),
                        "rounds": side.turns} for side in sides}


async def run_scale(config: dict[str, Any]) -> dict[str, Any]:
    """Hold many games with both streams open; a light action load; RSS and latency."""
    count, per_channel = config["games"], config["streams_per_channel"]
    channels = _channels(config["target"], max(1, 2 * count // per_channel))
    stubs = [pb_grpc.GameServiceStub(c) for c in channels]
    pid = config["server_pid"]
    rss_before = rss_kib(pid)
    limit = asyncio.Semaphore(64)
    started = time.perf_counter()

    async def one(i: int) -> Game:
        async with limit:
            return await open_game(stubs[i % len(stubs)], "war", 2, 5000 + i)

    games = await asyncio.gather(*(one(i) for i in range(count)))
    create_s = time.perf_counter() - started
    tasks: list[asyncio.Task[None]] = []
    opening = asyncio.Semaphore(100)  # players arrive over time, not 10,000 at once
    for i, game in enumerate(games):
        open_streams(game, tasks, [stubs[(2 * i) % len(stubs)], stubs[(2 * i + 1) % len(stubs)]],
                     opening)
    # every stream is open once it has received its backlog (the claims and the deal)
    deadline = time.perf_counter() + max(60.0, count / 200)
    while time.perf_counter() < deadline:
        if all(min(g.arrivals.seen) >= g.version for g in games):
            break
        await asyncio.sleep(0.2)
    setup_s = time.perf_counter() - started
    open_streams_count = sum(1 for g in games for v in g.arrivals.seen if v >= g.version)
    await asyncio.sleep(config["settle_s"])  # let the last resumed streams calm down
    rss_held = rss_kib(pid)
    pauses_held = gc_pauses(config.get("metrics_port"))
    gc.collect()
    gc.freeze()  # the generator's own 40,000 streams must not pause its measurement,
    gc.disable()  # nor its own collections (a minute's cycles are little memory)

    rec = Recorder(measuring=True)
    rng = random.Random(7)
    rate, seconds = config["rate_per_s"], config["duration_s"]
    inflight: set[asyncio.Task[None]] = set()

    async def act(game: Game) -> None:
        try:
            picked = await next_action(game, "war", rng)
            if picked is None:
                return
            began = time.perf_counter()
            await submit(game, *picked)
            rec.submit_ms.append((time.perf_counter() - began) * 1000)
            rec.slowest.append((rec.submit_ms[-1], began))
            rec.actions += 1
        finally:
            game.busy = False

    lags: list[tuple[float, float]] = []

    async def watch_lag() -> None:
        """This process's own event-loop lag: a stalled generator is not a slow server."""
        while True:
            ticked = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append((time.perf_counter() - ticked - 0.01, ticked))

    watcher = asyncio.create_task(watch_lag())
    retries_before = STREAM_RETRIES[0]
    began = time.perf_counter()
    for n in range(int(rate * seconds)):
        at = began + n / rate
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        game = games[rng.randrange(count)]
        if not game.busy:
            game.busy = True
            task = asyncio.create_task(act(game))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
    if inflight:
        await asyncio.wait(inflight, timeout=10)
    load_s = time.perf_counter() - began
    watcher.cancel()
    gc.enable()
    rss_after = rss_kib(pid)
    pauses = gc_pauses(config.get("metrics_port"))
    for task in tasks:
        task.cancel()
    for channel in channels:
        await channel.close()
    result = _summary(rec, load_s)
    result["submit_max_ms"] = round(max(rec.submit_ms), 3) if rec.submit_ms else None
    result["server_max_gc_pause_ms"] = pauses.get("max_ms")
    result["server_gc_pauses"] = {"after_setup": pauses_held, "at_end": pauses}
    result["rss_growth_ratio"] = round(rss_after / rss_held, 3) if rss_held else None
    result["stream_retries_during_load"] = STREAM_RETRIES[0] - retries_before
    worst_lag = max(lags, default=(0.0, began))
    result["generator_max_loop_lag_ms"] = [round(worst_lag[0] * 1000, 1),
                                           round(worst_lag[1] - began, 2)]
    result["slowest_ms_at_s"] = [(round(ms, 1), round(at - began, 2))
                                 for ms, at in sorted(rec.slowest, reverse=True)[:10]]
    result.update(games=count, stream_retries=STREAM_RETRIES[0],
                  streams_open=open_streams_count, channels=len(channels),
                  create_s=round(create_s, 1), setup_s=round(setup_s, 1), rss_before_kib=rss_before,
                  rss_held_kib=rss_held, rss_after_kib=rss_after,
                  rss_kib_per_game=round((max(rss_held, rss_after) - rss_before) / count, 1))
    return result


def gc_pauses(metrics_port: int | None) -> dict[str, Any]:
    """The server's collector pauses so far, from its metrics: the longest (ms), and the count
    and total ms by generation."""
    if not metrics_port:
        return {}
    import urllib.request

    figures: dict[str, Any] = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        for line in page.read().decode().splitlines():
            name, _, value = line.rpartition(" ")
            if name == "tapis_gc_pause_max_seconds":
                figures["max_ms"] = round(float(value) * 1000, 2)
            if name == "tapis_loop_lag_max_seconds":
                figures["loop_lag_max_ms"] = round(float(value) * 1000, 2)
            if name == "tapis_gc_collected_total":
                figures["collected"] = float(value)
            for suffix, unit in (("_count", 1), ("_sum", 1000)):
                if name.startswith(f"tapis_gc_pause_seconds{suffix}{{"):
                    generation = name.split('"')[1]
                    figures[f"gen{generation}{suffix}"] = round(float(value) * unit, 1)
    return figures


def main() -> None:
    raise_fd_limit()
    config = json.loads(sys.argv[1])
    runner = {"scale": run_scale, "interleaved": run_interleaved}.get(config["mode"],
                                                                     run_actions)
    print(json.dumps(asyncio.run(runner(config))))


if __name__ == "__main__":
    main()
